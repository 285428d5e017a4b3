"""Record types and their state machines — the one definition code, journal and diagrams share.

Rows are `TypedDict`s: what a journal read returns and a journal insert takes, column for column
(JSON columns hold JSON text). They cost nothing at run time. The transition tables are the ones
the code checks when it settles a row (`settling`, `finishing`), and the ones the diagrams draw.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, NotRequired, TypedDict, cast

from emceepee_cli.store.unreadable import UnreadableRow, json_column, skipped


class TaskStatus(StrEnum):
    WORKING = "working"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    INTERRUPTED = "interrupted"


class Kind(StrEnum):
    """What a backend's question asks for: a person's answer, or an LLM's completion."""

    ELICITATION = "elicitation"
    SAMPLING = "sampling"


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


PENDING = "pending"  # every question starts here, whatever its kind

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
        ElicitationStatus.REJECTED: "the backend withdrew it or died, or a client refused it",
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


class BadTransition(RuntimeError):
    """A row or a call was asked to move in a way its state machine does not allow (a bug in emceepee)."""


def finishing(status: str) -> TaskStatus:
    """`status` as the end of a working task; BadTransition if the task table has no such move."""
    if status not in TASK_TRANSITIONS[TaskStatus.WORKING]:
        raise BadTransition(f"a task cannot go {TaskStatus.WORKING} -> {status}")
    return TaskStatus(status)


def settling(kind: str, status: str) -> str:
    """`status` as the end of a pending question of `kind`; BadTransition if its table has no such move."""
    moves: dict[Any, str] = (
        SAMPLING_TRANSITIONS[SamplingStatus.PENDING]
        if kind == Kind.SAMPLING
        else ELICITATION_TRANSITIONS[ElicitationStatus.PENDING]
    )
    if status not in moves:
        raise BadTransition(f"a {kind} question cannot go {PENDING} -> {status}")
    return status


# ---- rows, as the journal holds them ----------------------------------------------------------


class TaskRow(TypedDict):
    task_id: str
    instance_id: str
    server: str
    tool: str
    args: str | None  # JSON
    status: str
    status_message: str | None
    progress: str | None  # JSON
    result: str | bytes | None  # JSON: the backend's CallToolResult (bytes: as sent, store/tables/results.py)
    error: str | None
    created_at: str
    last_updated_at: str
    expires_at: str | None
    finished_at: str | None
    cancel_requested: int
    request_state: str | None  # a 2026-07-28 call suspended on input: the backend's state
    round: int | None
    resume_token: NotRequired[str | None]  # the backend's latest nextResumeToken (see calls/resume.py)
    auto_resume: NotRequired[int | None]  # 1: emceepee resumes it itself, also after a restart


class PendingRow(TypedDict):
    request_id: str
    instance_id: str
    server: str
    kind: str
    params: str  # JSON: the request's params
    status: str
    task_id: str | None
    correlation: str  # exact | sole | server
    input_key: str | None
    round: int
    forwarded: int
    created_at: str
    expires_at: str
    answered_at: str | None
    answered_by: str | None
    answer: str | None  # JSON
    error: str | None
    purpose: NotRequired[str | None]  # "approval": emceepee asks before running a tool
    approval: NotRequired[str | None]  # JSON: {tool, arguments, reason, step} of an approval
    error_detail: NotRequired[str | None]  # JSON: {code, message, data} a client refused it with


class StepRow(TypedDict):
    """One result of a call: a chained step, or one automatic resume of a step."""

    task_id: str
    step: int
    kind: str  # call | chain | resume
    tool: str
    args: str | None  # JSON
    outcome: str
    text: str | None
    result: str | None  # JSON: the backend's CallToolResult
    resume_token: str | None
    started_at: str
    finished_at: str | None


class InstanceRow(TypedDict):
    instance_id: str
    pid: int
    machine: str
    proc_start: str | None
    started_at: str
    heartbeat_at: str
    stopped_at: str | None
    host_name: str | None
    host_version: str | None


class EventRow(TypedDict):
    event_id: str
    instance_id: str
    type: str
    server: str | None
    data: str  # JSON
    created_at: str


class SpawnedRow(TypedDict):
    instance_id: str
    server: str  # the backend it is, or was started by; "" when that could not be told
    pid: int
    start_time: int | None
    spawned_at: str


class LeftRow(SpawnedRow):
    """A process a dead serve left, with that serve's pid (`spawned` joined with `instances`)."""

    serve_pid: int | None


# ---- views: what every tool and CLI command shows ----------------------------------------------


class Event(TypedDict):
    """An event as the host receives it."""

    event_id: str
    type: str
    server: str | None
    created_at: str
    data: dict[str, Any]
    replayed: NotRequired[bool]  # kept for a session that ended before it could deliver it


class OwnedEvent(Event):
    """An event with the instance whose host it is for, as it is journaled."""

    instance_id: str


class TaskJson(TypedDict):
    task_id: str
    status: str
    server: str
    tool: str
    created_at: str
    last_updated_at: str
    status_message: NotRequired[str]
    error: NotRequired[str]
    expires_at: NotRequired[str]
    progress: NotRequired[dict[str, Any]]
    resume_token: NotRequired[str]
    is_error: NotRequired[bool]  # completed with the tool's own error result (isError)


class QuestionJson(TypedDict):
    request_id: str
    server: str
    kind: str
    message: NotRequired[str]
    url: NotRequired[str | None]
    requested_schema: NotRequired[dict[str, Any]]
    params: NotRequired[dict[str, Any]]
    task_id: NotRequired[str]
    correlation: str
    status: str
    created_at: str
    expires_at: str
    answered_by: NotRequired[str]
    error: NotRequired[str]
    purpose: NotRequired[str]
    approval: NotRequired[dict[str, Any]]


def task_json(row: TaskRow) -> TaskJson:
    """A journal row as the task object every tool and CLI command shows."""
    out = TaskJson(
        task_id=row["task_id"],
        status=row["status"],
        server=row["server"],
        tool=row["tool"],
        created_at=row["created_at"],
        last_updated_at=row["last_updated_at"],
    )
    if row.get("status_message"):
        out["status_message"] = str(row["status_message"])
    if row.get("error"):
        out["error"] = str(row["error"])
    if row.get("expires_at"):
        out["expires_at"] = str(row["expires_at"])
    if reported_error(row):
        out["is_error"] = True
    if row.get("progress"):
        try:  # passing news: a task shown without it is better than no task
            out["progress"] = json_column(row["progress"], f"progress of task {row['task_id']}")
        except UnreadableRow as exc:
            skipped(exc)
    return out


def reported_error(row: TaskRow) -> bool:
    """The task completed with the tool's own error result (`isError`): the call went through, the
    tool said it failed. A result kept elsewhere (store/tables/results.py) is not read for this."""
    result = row.get("result")
    if row["status"] != TaskStatus.COMPLETED or not result:
        return False
    if isinstance(result, bytes):
        result = result.decode("utf-8", "replace")
    if '"isError"' not in result:  # most results: no parse
        return False
    try:
        return json.loads(result).get("isError") is True
    except (ValueError, AttributeError):
        return False


def params_of(row: PendingRow) -> dict[str, Any]:
    """A question's request params."""
    params: dict[str, Any] = json_column(row["params"], f"question {row['request_id']}")
    return params


def approval_of(row: PendingRow) -> dict[str, Any]:
    """An approval's details as journaled: tool, arguments, reason, step, and who may accept it
    (`by`); {} for any other question."""
    return cast(dict[str, Any], json_column(row.get("approval") or "{}", f"question {row['request_id']}"))


def question_json(row: PendingRow) -> QuestionJson:
    """A pending question (elicitation or sampling) as every tool and CLI command shows it."""
    params = params_of(row)
    out: dict[str, Any] = {"request_id": row["request_id"], "server": row["server"], "kind": row["kind"]}
    if row["kind"] == Kind.ELICITATION:
        out["message"] = params.get("message", "")
        if params.get("mode") == "url":
            out["url"] = params.get("url")
        else:
            out["requested_schema"] = params.get("requested_schema", {})
    else:
        out["params"] = params
    if row.get("task_id"):
        out["task_id"] = row["task_id"]
    out.update(
        correlation=row["correlation"],
        status=row["status"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )
    if row.get("answered_by"):
        out["answered_by"] = row["answered_by"]
    if row.get("error"):
        out["error"] = row["error"]
    if row.get("purpose"):
        out["purpose"] = row["purpose"]
        out["approval"] = approval_of(row)
    return cast(QuestionJson, out)  # built in the order it is shown
