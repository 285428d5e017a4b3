"""Saga tokens: a suspended task, handed to the model as something it can resume.

A token names the task and the steps (pending questions) it was suspended on, with an expiry,
sealed under the per-install key (seal.py). `resume_tool` accepts only a token this install
signed, unaltered and unexpired.

A step's `params` are exactly the request's params (`elicitation/create`, `sampling/createMessage`,
wire camelCase), as a client following the saga design expects; emceepee's own details (server,
task, status, times; an approval's tool and arguments) sit beside them, snake_case.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import BaseModel

from emceepee_cli.errors import UsageError
from emceepee_cli.questions.answers import check_answer, check_approver, step_answer
from emceepee_cli.seal import seal, unseal
from emceepee_cli.store.records import Kind, PendingRow, params_of, question_json

TOKEN_TTL_S = 3600.0


def sign(key: bytes, task_id: str, step_ids: list[str], ttl_s: float = TOKEN_TTL_S) -> str:
    return seal(key, {"p": "saga", "t": task_id, "s": step_ids, "exp": int(time.time() + ttl_s)})


def verify(key: bytes, token: str) -> dict[str, Any]:
    """The token's claims {t: task id, s: step ids, exp}; a UsageError if forged, altered or expired."""
    claims = unseal(key, token.strip())
    if claims is None or claims.get("p", "saga") != "saga":
        raise UsageError(
            "This saga_token was not issued by this emceepee, or was altered.",
            hint="Use the saga_token exactly as get_task or execute_tool returned it.",
        )
    if claims["exp"] < time.time():
        raise UsageError(
            "This saga_token has expired.",
            hint="get_task(task_id) gives a fresh one while the task is suspended.",
        )
    return claims


# The question's own keys that are the request's params, shown once, inside `params`.
_PARAM_KEYS = ("request_id", "kind", "message", "requested_schema", "url", "params")


def request_params(row: PendingRow) -> dict[str, Any]:
    """A question's request params exactly as the backend sent them (wire camelCase)."""
    stored = params_of(row)
    model: type[BaseModel]
    if row["kind"] == Kind.SAMPLING:
        model = types.CreateMessageRequestParams
    elif stored.get("mode") == "url":
        model = types.ElicitRequestURLParams
    else:
        model = types.ElicitRequestFormParams
    try:
        dumped: dict[str, Any] = model.model_validate(stored).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
    except ValueError:  # an odd row from an older emceepee: show what was kept
        return stored
    return dumped


def step(row: PendingRow) -> dict[str, Any]:
    """One saga step: the request's params exactly, emceepee's own details beside them."""
    extras = {k: v for k, v in question_json(row).items() if k not in _PARAM_KEYS}
    return {"type": row["kind"], "step_id": row["request_id"], "params": request_params(row), **extras}


def view(key: bytes, task_id: str, rows: list[PendingRow]) -> dict[str, Any]:
    """A task blocked on the questions `rows`, as a saga the model can resume; empty when none."""
    if not rows:
        return {}
    token = sign(key, task_id, [r["request_id"] for r in rows])
    return {"saga": {"state": "suspended", "saga_token": token, "steps": [step(r) for r in rows]}}


@dataclass(frozen=True)
class Planned:
    """What one `completed_steps` entry does: answer a pending step, refuse it, or nothing."""

    row: PendingRow
    answer: dict[str, Any] | None = None
    error: dict[str, Any] | None = None  # {code, message, data?}


def plan(task_id: str, rows: list[PendingRow], steps: list[dict[str, Any]]) -> list[Planned]:
    """Check every entry against the task's whole journaled history before anything is applied.

    A step still pending is answered (its answer checked now); one already settled with the same
    answer is left as it is; a different answer, or a step of another task, is refused."""
    by_id = {r["request_id"]: r for r in rows}
    planned: list[Planned] = []
    for entry in steps:
        step_id = str(entry.get("step_id") or entry.get("stepId") or "")
        row = by_id.get(step_id.upper())
        if row is None:
            known = ", ".join(by_id) or "none"
            raise UsageError(
                f"Step {step_id} is not a step of task {task_id}'s saga (its steps: {known}).",
                hint="Give the step_id of one of the saga's steps, as get_task shows them.",
            )
        error = error_detail(entry["error"]) if "error" in entry and "result" not in entry else None
        if row["status"] != "pending":
            if not _same(row, entry, error):
                who = f" by {row['answered_by']}" if row.get("answered_by") else ""
                raise UsageError(
                    f"Step {step_id} was already {row['status']}{who} with a different answer; "
                    "nothing was changed.",
                    hint="Send the answer it was given, or leave the step out.",
                )
            continue
        if error is not None:
            planned.append(Planned(row, error=error))
            continue
        answer = step_answer(row["kind"], entry.get("result"))
        check_answer(row, answer)
        check_approver(row, answer, "model")  # resume_tool is the model's
        planned.append(Planned(row, answer=answer))
    return planned


def error_detail(error: Any) -> dict[str, Any]:
    """A step's `error`: a JSON-RPC error object {code, message, data?}, or a message alone."""
    if isinstance(error, dict):
        return {k: error[k] for k in ("code", "message", "data") if k in error}
    return {"code": types.INTERNAL_ERROR, "message": str(error)}


def _same(row: PendingRow, entry: dict[str, Any], error: dict[str, Any] | None) -> bool:
    """The entry repeats what the settled step was given (metadata such as a model name aside)."""
    if error is not None:
        kept = json.loads(str(row.get("error_detail") or "null")) or {}
        return (
            row["status"] == "rejected"
            and row.get("answered_by") == "model"
            and row.get("error") == error["message"]
            and kept.get("code", error["code"]) == error["code"]
        )
    if row["status"] in ("expired", "rejected") or row.get("answer") is None:
        return False
    given, kept = step_answer(row["kind"], entry.get("result")), json.loads(str(row["answer"]))
    keys: tuple[str, ...] = ("role", "content") if row["kind"] == Kind.SAMPLING else ("action", "content")
    if row["kind"] != Kind.SAMPLING and given.get("action") != "accept":
        keys = ("action",)
    return all(_canonical(given.get(k)) == _canonical(kept.get(k)) for k in keys)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
