"""Record types and their state machines — the one definition code, journal and diagrams share."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any


class TaskStatus(StrEnum):
    WORKING = "working"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    INTERRUPTED = "interrupted"


class ElicitationStatus(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DECLINED = "declined"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    REJECTED = "rejected"


class SamplingStatus(StrEnum):
    PENDING = "pending"
    COMPLETED = "completed"
    EXPIRED = "expired"
    REJECTED = "rejected"


# state -> {next state: why}; a state absent on the left is final.
TASK_TRANSITIONS: dict[TaskStatus, dict[TaskStatus, str]] = {
    TaskStatus.WORKING: {
        TaskStatus.COMPLETED: "the backend returned a result",
        TaskStatus.FAILED: "the backend failed or died",
        TaskStatus.CANCELLED: "cancel_task / emceepee tasks cancel",
        TaskStatus.EXPIRED: "the task's TTL passed",
        TaskStatus.INTERRUPTED: "the emceepee process that owned it stopped",
    },
}

ELICITATION_TRANSITIONS: dict[ElicitationStatus, dict[ElicitationStatus, str]] = {
    ElicitationStatus.PENDING: {
        ElicitationStatus.ACCEPTED: "answered with content",
        ElicitationStatus.DECLINED: "the user declined",
        ElicitationStatus.CANCELLED: "the user dismissed it",
        ElicitationStatus.EXPIRED: "nobody answered in time",
        ElicitationStatus.REJECTED: "the backend withdrew it or died",
    },
}

SAMPLING_TRANSITIONS: dict[SamplingStatus, dict[SamplingStatus, str]] = {
    SamplingStatus.PENDING: {
        SamplingStatus.COMPLETED: "answered with a completion",
        SamplingStatus.EXPIRED: "nobody answered in time",
        SamplingStatus.REJECTED: "the backend withdrew it or died",
    },
}

FINISHED_TASK = tuple(s for s in TaskStatus if s not in TASK_TRANSITIONS)


def task_json(row: dict[str, Any]) -> dict[str, Any]:
    """A journal row as the task object every tool and CLI command shows."""
    out = {key: row[key] for key in ("task_id", "status", "server", "tool", "created_at", "last_updated_at")}
    for key in ("status_message", "error", "expires_at"):
        if row.get(key):
            out[key] = row[key]
    if row.get("progress"):
        out["progress"] = json.loads(row["progress"])
    return out


def question_json(row: dict[str, Any]) -> dict[str, Any]:
    """A pending question (elicitation or sampling) as every tool and CLI command shows it."""
    params = json.loads(row["params"]) if isinstance(row["params"], str) else row["params"]
    out: dict[str, Any] = {"request_id": row["request_id"], "server": row["server"], "kind": row["kind"]}
    if row["kind"] == "elicitation":
        out["message"] = params.get("message", "")
        if params.get("mode") == "url":
            out["url"] = params.get("url")
        else:
            out["requested_schema"] = params.get("requested_schema", {})
    else:
        out["params"] = params
    if row.get("task_id"):
        out["task_id"] = row["task_id"]
    out.update({key: row[key] for key in ("correlation", "status", "created_at", "expires_at")})
    for key in ("answered_by", "error"):
        if row.get(key):
            out[key] = row[key]
    return out
