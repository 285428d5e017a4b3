"""Meta-tools for tasks (calls that outlived their wait) and for waiting on what happens."""

from __future__ import annotations

from typing import Any

from emceepee_cli.calls.call import WorkingTask
from emceepee_cli.server.envelope import Reply
from emceepee_cli.server.meta_tools.registry import SERVER_FILTER, Call, Group, Payload
from emceepee_cli.session.wiring import Services
from emceepee_cli.store.pages import MAX_PAGE_SIZE, PAGE_SIZE
from emceepee_cli.store.records import TaskStatus

group = Group()

TASK_ID = {"type": "string", "description": "A task id (or a unique prefix of one)."}
WAIT_MS = {"type": "integer", "minimum": 0}


@group.tool(
    "list_tasks",
    "List tasks (tool calls that outlived their execute_tool wait), newest first, a page at a time. By "
    "default only those still working. `more` says how many are left (`more_at_least` past 1000); pass "
    "`next_cursor` back as cursor (with the same filters) for the next page.",
    {
        "server": SERVER_FILTER,
        "status": {
            "type": "string",
            "enum": [s.value for s in TaskStatus],
            "description": "Only tasks in this state.",
        },
        "include_completed": {
            "type": "boolean",
            "default": False,
            "description": "Also list finished tasks.",
        },
        "cursor": {"type": "string", "description": "The next_cursor of the previous page."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_PAGE_SIZE,
            "default": PAGE_SIZE,
            "description": f"Tasks per page (default {PAGE_SIZE}).",
        },
    },
)
async def list_tasks(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.tasks.list_tasks(
        args.get("server"),
        args.get("status"),
        args.get("include_completed", False),
        args.get("cursor"),
        args.get("limit"),
    )


@group.tool(
    "get_task",
    "Show one task's state, with the questions pending on its server, and every result its call "
    "produced so far when there were several (chained tools, resumes), each whole.",
    {"task_id": TASK_ID},
    ("task_id",),
)
async def get_task(services: Services, args: dict[str, Any], call: Call) -> Payload:
    task = await services.tasks.get_json(args["task_id"])
    steps = await services.tasks.steps(task["task_id"])
    pending = services.questions.for_server(task["server"])
    saga = services.tasks.saga(task["task_id"])
    return {
        "task": task,
        **({"steps": steps} if steps else {}),
        "pending_elicitations_for_server": pending["elicitations_for_server"],
        **_cut_as(pending, "elicitations_for_server", "pending_elicitations_for_server"),
        **({"saga": saga} if saga is not None else {}),
    }


def _cut_as(block: dict[str, Any], key: str, name: str) -> dict[str, Any]:
    """The `total` and `more` (questions/newest.py) of one list of `block`, shown under another name."""
    if key not in block.get("more", {}):
        return {}
    return {"total": {name: block["total"][key]}, "more": {name: block["more"][key]}}


@group.tool(
    "get_task_result",
    "Get a task's result: the backend's own result once completed (waiting up to timeout_ms, "
    "capped below the host's timeout, while it works); the task itself if still working; an error "
    "saying why if it failed, was cancelled, expired or was interrupted.",
    {
        "task_id": TASK_ID,
        "timeout_ms": {
            **WAIT_MS,
            "description": "How long to wait for a working task (default: the cap, 50000).",
        },
    },
    ("task_id",),
)
async def get_task_result(services: Services, args: dict[str, Any], call: Call) -> Payload:
    out = await services.tasks.result(args["task_id"], args.get("timeout_ms"), call.relay)
    if isinstance(out, WorkingTask):
        return Reply(
            out.payload(), f"Task {out.task['task_id']} is still working; ask again later or await_activity."
        )
    return out


@group.tool(
    "cancel_task",
    "Cancel a working task: the backend call is cancelled for real.",
    {"task_id": TASK_ID},
    ("task_id",),
    read_only=False,
)
async def cancel_task(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.tasks.cancel(args["task_id"])


@group.tool(
    "await_activity",
    "Wait until something happens (a task finishes, a backend connects, dies or changes its lists, "
    "a question arrives) or timeout_ms passes; returns at once if events are waiting. Returns "
    "triggers, events, the tasks still working (pending_server), the questions awaiting an answer "
    "(pending_client) and last_event_id. If a reply was lost, pass the last event id you saw as "
    "since_event_id to have the events after it again. Each event is delivered once: when several "
    "calls wait at once, every one wakes; the events go with the first reply, and the others return "
    "with the trigger delivered_elsewhere (its since_event_id reads them again). Only the newest 5 "
    "of each list of tasks and questions come along; `more` says how many more and which tool lists "
    "them all.",
    {
        "timeout_ms": {
            **WAIT_MS,
            "default": 30000,
            "description": "Longest wait (default 30000; capped below the host's timeout).",
        },
        "since_event_id": {
            "type": "string",
            "description": "Also return the events delivered after this one (the last_event_id of an earlier "
            "reply), read back from the journal.",
        },
    },
)
async def await_activity(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.await_activity(args.get("timeout_ms", 30000), args.get("since_event_id"))
