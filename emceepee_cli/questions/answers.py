"""Answering a backend's question: the checks and the settling, one synchronous function each.

`answer_question` is the one way an answer is recorded, whoever gives it: `emceepee answer` calls
it directly, a `serve` (the model, the host's form, `resume_tool`) through the journal's worker
thread. The first writer wins; a later one learns who answered first. No anyio here: the CLI
runs it as it is.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import mcp_types as types

from emceepee_cli import schema
from emceepee_cli.clock import age
from emceepee_cli.errors import UsageError
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import (
    ElicitationStatus,
    Kind,
    PendingRow,
    SamplingStatus,
    TaskStatus,
    approval_of,
    params_of,
)

ACTION_STATUS = {
    "accept": ElicitationStatus.ACCEPTED,
    "decline": ElicitationStatus.DECLINED,
    "cancel": ElicitationStatus.CANCELLED,
}
ANSWERED_WITH = {Kind.ELICITATION: "respond_to_elicitation", Kind.SAMPLING: "respond_to_sampling"}


def answer_question(
    journal: Journal, request_id: str, answer: dict[str, Any], by: str, kind: str | None = None
) -> PendingRow:
    """Check `answer` against the question `request_id` (a unique prefix will do) and record it;
    the question's settled row. A UsageError says what is wrong, or who answered first."""
    row = journal.pending.resolve(request_id)
    if kind is not None and row["kind"] != kind:
        raise UsageError(
            f"Request {row['request_id']} is a {row['kind']} request.",
            hint=f"Answer it with {ANSWERED_WITH[Kind(row['kind'])]}.",
        )
    status, answer = check_answer(row, answer)
    check_approver(row, answer, by)
    settled = journal.pending.settle(row["request_id"], status, answer=answer, by=by)
    now = journal.pending.row(row["request_id"]) or row
    if not settled:
        raise already_answered(now)
    return now


def who_delivers(journal: Journal, row: PendingRow) -> str:
    """How an answer written now reaches the backend; a UsageError (write nothing) when nothing can
    pass it on: the process that asked is gone and the call cannot be resumed."""
    if row["status"] != "pending":
        raise _not_pending(row)
    owner = journal.instances.row(row["instance_id"])
    if owner is not None and journal.instances.alive(owner):
        pid = owner["pid"]
        return f"the emceepee process that asked (pid {pid}) will pass it to the backend within a moment."
    seen = (
        f"(pid {owner['pid']}, last seen {age(owner['stopped_at'] or owner['heartbeat_at'])} ago)"
        if owner is not None
        else "(no record of it)"
    )
    task = journal.tasks.row(row["task_id"]) if row["task_id"] else None
    if task is not None and task["request_state"] is not None and task["status"] == TaskStatus.WORKING:
        return (
            f"the emceepee process that asked {seen} has stopped; the answer will be delivered when emceepee "
            f"next starts (it resumes the call)."
        )
    raise UsageError(
        f"The emceepee process that asked question {row['request_id']} {seen} is gone, so no backend is "
        f"waiting for the answer. Nothing was answered.",
        hint="Call the tool again from your MCP host; it will ask again.",
    )


def check_approver(row: PendingRow, answer: dict[str, Any], by: str) -> None:
    """An approval is accepted only by whom the server's `approval_by` names (anyone may decline);
    one of the model's own server changes never by the model."""
    if row.get("purpose") != "approval" or answer.get("action") != "accept":
        return
    approval = approval_of(row)
    allowed, change = approval.get("by"), approval.get("change")
    if not isinstance(allowed, list):  # journaled before approval_by existed: anyone
        allowed = ["host", "cli", "model"]
    if by in allowed and not (change and by == "model"):
        return
    request_id = row["request_id"]
    ways = {
        "host": "by the user in their MCP client",
        "cli": f"by the user in a terminal (`emceepee answer {request_id}`)",
        "model": "by the model (respond_to_elicitation)",
    }
    only = " or ".join(ways[w] for w in allowed if w in ways and not (change and w == "model"))
    if change:  # the model's own add_server / remove_server (session/server_changes.py)
        raise UsageError(
            f"Approval {request_id} ({change}) can be accepted only {only}, not by the {by}. It is still "
            "pending.",
            hint="Ask the user to approve it that way, or decline it. Letting the model add and remove "
            'servers without a person is the user\'s choice: [defaults] model_adds_servers = "allow".',
            cli_hint=f"Approve it that way, or decline it: emceepee answer {request_id} --decline",
        )
    raise UsageError(
        f"Approval {request_id} can be accepted only {only} "
        f"(approval_by = {json.dumps(allowed)} for '{row['server']}'), not by the {by}. It is still pending.",
        hint="Ask the user to approve it that way, or decline it. Letting the model approve "
        "this server's calls is the user's choice: \"model\" in approval_by.",
        cli_hint=f"Approve it that way, or decline it: emceepee answer {request_id} --decline. Who may "
        f"approve '{row['server']}'s calls is its approval_by in the config.",
    )


def _not_pending(row: PendingRow) -> UsageError:
    base = already_answered(row)
    if not row.get("error"):
        return base
    return UsageError(f"{base.message} ({row['error']})", hint=base.hint, cli_hint=base.cli_hint)


def check_answer(row: PendingRow, answer: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The status this answer gives the question and the answer as recorded (an accepted form with
    the schema's defaults filled in), or a UsageError naming what is wrong."""
    if row["status"] != "pending":
        raise already_answered(row)
    params = params_of(row)
    if row["kind"] == Kind.SAMPLING:
        try:
            types.CreateMessageResult.model_validate(answer)
        except ValueError as exc:
            raise UsageError(
                f"Not a valid sampling answer: {exc}", hint="Give the completion's text as `content`."
            ) from exc
        return SamplingStatus.COMPLETED.value, answer
    action = answer.get("action")
    if action not in ACTION_STATUS:
        raise UsageError(f"action must be accept, decline or cancel (got {action!r}).")
    if action == "accept" and params.get("mode") != "url":
        requested = params.get("requested_schema") or params.get("requestedSchema") or {}
        answer = {**answer, "content": with_defaults(requested, answer.get("content"))}
        wrong = schema.problems(answer["content"], requested, root="content")
        if wrong:
            raise UsageError(
                "The answer does not match the question's schema:\n- " + "\n- ".join(wrong),
                hint="Fix the fields named and answer again; the question is still pending.",
            )
    try:
        types.ElicitResult.model_validate(answer)
    except ValueError as exc:
        raise UsageError(
            f"Not a valid elicitation answer: {exc}",
            hint="Values must be strings, numbers, booleans or lists of strings.",
        ) from exc
    return ACTION_STATUS[action].value, answer


def with_defaults(requested: dict[str, Any], content: dict[str, Any] | None) -> dict[str, Any]:
    """`content` with each absent top-level field that has a `default` in the schema filled in
    (SEP-1034): accepting a form with `{}` means "the defaults". A value given, even null, stays."""
    filled = dict(content or {})
    properties = requested.get("properties") if isinstance(requested, dict) else None
    for name, prop in (properties if isinstance(properties, dict) else {}).items():
        if name not in filled and isinstance(prop, dict) and "default" in prop:
            filled[name] = copy.deepcopy(prop["default"])
    return filled


def already_answered(row: PendingRow) -> UsageError:
    who = f" by {row['answered_by']}" if row.get("answered_by") else ""
    return UsageError(
        f"Request {row['request_id']} was already {row['status']}{who}.", hint="Nothing was changed."
    )


def backend_reply(row: PendingRow) -> types.ElicitResult | types.CreateMessageResult | types.ErrorData:
    """What the backend receives for a settled question."""
    return elicit_reply(row) if row["kind"] == Kind.ELICITATION else sample_reply(row)


def elicit_reply(row: PendingRow) -> types.ElicitResult | types.ErrorData:
    return _refused(row) or types.ElicitResult.model_validate(json.loads(row["answer"] or "null"))


def sample_reply(row: PendingRow) -> types.CreateMessageResult | types.ErrorData:
    return _refused(row) or types.CreateMessageResult.model_validate(json.loads(row["answer"] or "null"))


def _refused(row: PendingRow) -> types.ErrorData | None:
    """The error a backend receives for a question nobody answered (None: it was answered)."""
    if row["status"] not in ("expired", "rejected"):
        return None
    detail = json.loads(str(row.get("error_detail") or "null"))
    if isinstance(detail, dict) and row.get("answered_by") == "model":  # the client's own error (resume_tool)
        return types.ErrorData(code=detail["code"], message=detail["message"], data=detail.get("data"))
    code = types.REQUEST_TIMEOUT if row["status"] == "expired" else types.INTERNAL_ERROR
    ended = "expired" if row["status"] == "expired" else f"was {row['status']}"
    message = f"emceepee: the request {ended}: {row.get('error') or ''}".strip()
    return types.ErrorData(code=code, message=message)


def step_answer(kind: str, result: Any) -> dict[str, Any]:
    """A saga step's `result` as an answer: content alone means accept; text alone is a completion."""
    if kind == Kind.SAMPLING:
        if isinstance(result, dict) and "role" in result:
            return result
        content = result.get("content") if isinstance(result, dict) else result
        return sampling_answer(str(content if content is not None else ""), None, None)
    if isinstance(result, dict) and "action" in result:
        return result
    return {"action": "accept", "content": result or {}}


def sampling_answer(text: str, model: str | None, stop_reason: str | None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": model or "unknown",
    }
    if stop_reason:
        answer["stop_reason"] = stop_reason
    return answer
