"""The protocol's own Tasks (MCP 2025-11-25) toward the host, over emceepee's journaled tasks.

A host that speaks 2025-11-25 sees the `tasks` capability (list, cancel, task-augmented
`tools/call`) and `execution.taskSupport` on `execute_tool` and on every direct tool. A
`tools/call` with `params.task` runs as `execute_tool` with no wait: it is promoted at once, and
the host gets `CreateTaskResult` with emceepee's own task id (calls/tasks.py). The SDK would sieve
that answer out of a tools/call handler, so it is given by a middleware, before the handler.

`tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` read and move the journal, never a
call held in memory only, so they answer for a task of any `serve`, also one started before a
restart. `tasks/result` waits (for as long as the host's request lives) and then gives what a
plain call would have: the backend's result, or the error result saying why the task ended,
with the reply's envelope, and the related-task `_meta`. The meta-tools see the same tasks.

emceepee's states map onto the spec's five: `working`, or `input_required` while a question
of the task's own waits (the status message says how to answer it: the host was asked, or it is
parked for respond_to_* or `emceepee answer`); `completed`, `cancelled`; `failed`, `expired` and
`interrupted` are `failed`, the status message saying which and why. A tool's own error result
(`isError`) is `failed` too, as 2025-11-25 asks for tool calls (the journal keeps it `completed`,
with `is_error` on the task), and `tasks/result` gives that result. `ttl` is the retention of finished
tasks (a requested one is checked, not used). The host that created a task hears
`notifications/tasks/status` on each change of status or message, until it ends.

A 2026-07-28 request carries no Tasks in SDK 2.3 (its Tasks extension is not there): such a host
is offered none of this, and uses the meta-tools.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.session import ServerSession
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from emceepee_cli import schema
from emceepee_cli.calls import resume
from emceepee_cli.calls.call import Passed, ProxyTask, WorkingTask
from emceepee_cli.errors import EmceepeeError, UsageError
from emceepee_cli.redact import redact
from emceepee_cli.server.envelope import error_result, with_envelope
from emceepee_cli.server.meta_tools import TOOLS
from emceepee_cli.session.wiring import Services
from emceepee_cli.store.prefixes import ID_LENGTH
from emceepee_cli.store.records import Kind, PendingRow, TaskJson, TaskStatus, task_json

log = logging.getLogger(__name__)

RELATED_TASK = "io.modelcontextprotocol/related-task"
POLL_INTERVAL_MS = 1000  # what a host is told to poll tasks/get at
WAKE_S = 1.0  # tasks/result looks at a task owned elsewhere (or waiting on a question) this often
RELAY_S = 5.0  # the status relay looks again even when no event came
PAGE_SIZE = 50
TASK_TOOLS = ("execute_tool",)  # emceepee's own tools that run as a task; every direct tool does too
CAPABILITY = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(
        tools=types.TasksToolsCapability(call=types.TasksCallCapability())
    ),
)
SPEC_STATUS: dict[str, types.TaskStatus] = {
    TaskStatus.WORKING: "working",
    TaskStatus.COMPLETED: "completed",
    TaskStatus.CANCELLED: "cancelled",
    TaskStatus.FAILED: "failed",
    TaskStatus.EXPIRED: "failed",
    TaskStatus.INTERRUPTED: "failed",
}
TERMINAL = ("completed", "failed", "cancelled")

NoteHost = Callable[[ServerRequestContext[Services], Services], None]


class TasksServer(Server[Services]):
    """The low-level server, declaring the `tasks` capability to a handshake-era host (the SDK
    derives none for it; `initialize` and `server/discover` both ask here)."""

    def get_capabilities(
        self,
        notification_options: Any = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        caps = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        if protocol_version not in MODERN_PROTOCOL_VERSIONS:
            caps.tasks = CAPABILITY
        return caps


def task_support(tool: types.Tool) -> types.Tool:
    """An emceepee tool as tools/list shows it: `execute_tool` may run as a task."""
    if tool.name not in TASK_TOOLS:
        return tool
    return tool.model_copy(update={"execution": types.ToolExecution(task_support="optional")})


@dataclass
class Owned:
    """A task a host created here: where its status goes, and what that host last heard."""

    session: ServerSession
    heard: tuple[str, str | None]


class NativeTasks:
    """The task-augmented call and the four `tasks/*` requests, for one `serve`."""

    def __init__(self, note_host: NoteHost) -> None:
        self.note_host = note_host
        self.owned: dict[str, Owned] = {}
        self.relaying = False

    def __repr__(self) -> str:
        return f"<NativeTasks owned={len(self.owned)}>"

    def register(self, server: Server[Services]) -> None:
        """The handlers, and the middleware (innermost: it sees the params the others rewrote)."""
        server.add_request_handler("tasks/get", types.GetTaskRequestParams, self.on_get)
        server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, self.on_result)
        server.add_request_handler("tasks/list", types.PaginatedRequestParams, self.on_list)
        server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, self.on_cancel)
        server.middleware.append(self.task_augmented)

    # ---- tools/call with params.task -------------------------------------------------------

    async def task_augmented(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        params = ctx.params
        if ctx.method != "tools/call" or not isinstance(params, Mapping) or params.get("task") is None:
            return await call_next(ctx)
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return await call_next(ctx)  # no Tasks in that era: the SDK's checks answer it
        services: Services = ctx.lifespan_context
        requested_ttl(params["task"])
        call = types.CallToolRequestParams.model_validate(dict(params), by_name=False)
        args = execute_args(services, call.name, call.arguments)
        self.note_host(ctx, services)
        try:
            out = await services.servers.execute_tool(
                args["server"],
                args["tool"],
                args.get("args"),
                0,
                None,
                follow_next_tool=args.get("follow_next_tool"),
                auto_resume=args.get("auto_resume"),
                resume_token=args.get("resume_token"),
            )
        except EmceepeeError as exc:
            refuse(exc)
        if not isinstance(out, ProxyTask):  # only a task's own resume token answers at once; refused above
            raise MCPError(types.INTERNAL_ERROR, "emceepee answered this call without making it a task")
        task = await self.task_of(services, out.task["task_id"])
        self.owned[task.task_id] = Owned(ctx.session, (task.status, task.status_message))
        if not self.relaying:
            self.relaying = True
            services.runtime.spawn(self._relay, services, name="tasks/status relay")
        return types.CreateTaskResult(task=task).model_dump(by_alias=True, mode="json", exclude_none=True)

    # ---- tasks/* ---------------------------------------------------------------------------

    async def on_get(
        self, ctx: ServerRequestContext[Services], params: types.GetTaskRequestParams
    ) -> types.GetTaskResult:
        task = await self.task_of(ctx.lifespan_context, params.task_id)
        return types.GetTaskResult.model_validate(task.model_dump())

    async def on_result(
        self, ctx: ServerRequestContext[Services], params: types.GetTaskPayloadRequestParams
    ) -> types.CallToolResult:
        """The task's result once it ends, as a plain call would have answered; the wait lasts
        as long as the host's request (its cancel ends the wait, never the task)."""
        services = ctx.lifespan_context
        task_id = (await self.task_of(services, params.task_id)).task_id
        own = False
        try:
            while True:
                seen = services.events.arrivals
                out = await services.tasks.result(task_id, None, None)
                if not isinstance(out, WorkingTask):
                    break
                await services.events.arrival(seen, WAKE_S)  # suspended, or owned by another serve
            result = out.model() if isinstance(out, Passed) else out
        except EmceepeeError as exc:  # it ended without a result: the error result a call gets
            result, own = error_result(exc), True
        events, pending = services.events.take(), services.questions.for_client()
        result = with_envelope(result, events, pending, own=own, journal_fault=services.journal.fault)
        meta = {**(result.meta or {}), RELATED_TASK: {"taskId": task_id}}
        return result.model_copy(update={"meta": meta})

    async def on_list(
        self, ctx: ServerRequestContext[Services], params: types.PaginatedRequestParams | None
    ) -> types.ListTasksResult:
        """Every task the journal keeps, newest first, a page at a time (store/pages.py)."""
        services = ctx.lifespan_context
        cursor = params.cursor if params is not None else None
        try:
            page = await services.tasks.list_tasks(None, None, True, cursor, PAGE_SIZE)
        except UsageError as exc:
            refuse(exc)
        asked = await self.questions(services, None)
        tasks = [self.spec_task(services, t, asked.get(t["task_id"], [])) for t in page["tasks"]]
        return types.ListTasksResult(tasks=tasks, next_cursor=page.get("next_cursor"))

    async def on_cancel(
        self, ctx: ServerRequestContext[Services], params: types.CancelTaskRequestParams
    ) -> types.CancelTaskResult:
        """Cancel the call for real, as cancel_task does; a task that has ended is refused."""
        services = ctx.lifespan_context
        task_id = (await self.task_of(services, params.task_id)).task_id
        try:
            out = await services.tasks.cancel(task_id)
        except EmceepeeError as exc:
            refuse(exc)
        task = await self.task_of(services, task_id)
        if out.get("cancel_requested") and task.status not in TERMINAL:
            task.status_message = str(out["message"])
        return types.CancelTaskResult.model_validate(task.model_dump())

    # ---- the spec's view of a task ---------------------------------------------------------

    async def task_of(self, services: Services, task_id: str) -> types.Task:
        """The task as the spec shows it; -32602 for an id no task has."""
        if len(task_id) != ID_LENGTH:
            shown = task_id if len(task_id) <= 40 else task_id[:37] + "…"
            raise MCPError(
                types.INVALID_PARAMS, f"No task '{shown}'.", {"hint": "tasks/list shows the tasks."}
            )
        try:
            row = await services.tasks.row(task_id)
        except EmceepeeError as exc:
            refuse(exc)
        asked = await self.questions(services, row["task_id"])
        return self.spec_task(services, task_json(row), asked.get(row["task_id"], []))

    async def questions(self, services: Services, task_id: str | None) -> dict[str, list[PendingRow]]:
        """The questions waiting on an answer, by the task they belong to (of any `serve`); a URL
        parked for later blocks no call, so no task waits on it."""
        rows = await services.journal.run(services.journal.sync.pending.rows, task_id=task_id)
        live = services.questions.live
        out: dict[str, list[PendingRow]] = {}
        for row in rows:
            question = live.get(row["request_id"])
            if row["task_id"] is not None and (question is None or question.blocks_call):
                out.setdefault(row["task_id"], []).append(row)
        return out

    def spec_task(self, services: Services, task: TaskJson, asked: list[PendingRow]) -> types.Task:
        status, message = SPEC_STATUS[task["status"]], task.get("status_message")
        if task["status"] == TaskStatus.WORKING and asked:
            status, message = "input_required", self.how_to_answer(services, asked)
        elif task.get("is_error"):  # 2025-11-25: a tool call whose result has isError is `failed`
            status, message = "failed", "the tool answered with an error result; tasks/result gives it"
        elif task["status"] == TaskStatus.COMPLETED:
            message = None
        elif task["status"] != TaskStatus.WORKING:
            message = f"{task['status']}: {task.get('error') or 'no reason recorded'}"
        return types.Task(
            task_id=task["task_id"],
            status=status,
            status_message=message,
            created_at=task["created_at"],
            last_updated_at=task["last_updated_at"],
            ttl=services.shared.defaults.retention_s * 1000,
            poll_interval=POLL_INTERVAL_MS,
        )

    def how_to_answer(self, services: Services, asked: list[PendingRow]) -> str:
        """What the task waits on, and how it gets its answer."""
        first = asked[0]
        request_id, kind, server = first["request_id"], first["kind"], first["server"]
        more = f" (and {len(asked) - 1} more)" if len(asked) > 1 else ""
        question = services.questions.live.get(request_id)
        if question is not None and question.forwarding:
            return f"waiting for your answer to the {kind} request emceepee sent you for '{server}'{more}"
        tool = "respond_to_sampling" if kind == Kind.SAMPLING else "respond_to_elicitation"
        return (
            f"waiting for an answer to {kind} {request_id} from '{server}'{more}, parked: answer it "
            f"with {tool}(request_id='{request_id}') or resume_tool, or in a terminal: "
            f"emceepee answer {request_id}"
        )

    # ---- notifications/tasks/status --------------------------------------------------------

    async def _relay(self, services: Services) -> None:
        """Tell each host the changes of the tasks it created, as events show something moved
        (a question, an answer, a task's end), until every one of them has ended."""
        try:
            while self.owned:
                seen = services.events.arrivals
                for task_id, owned in list(self.owned.items()):
                    await self._tell(services, task_id, owned)
                await services.events.arrival(seen, RELAY_S)
        finally:
            self.relaying = False

    async def _tell(self, services: Services, task_id: str, owned: Owned) -> None:
        try:
            task = await self.task_of(services, task_id)
        except MCPError as exc:  # purged (forget it), or the journal cannot say now (look again)
            if exc.code == types.INVALID_PARAMS:
                del self.owned[task_id]
            return
        if task.status in TERMINAL:
            del self.owned[task_id]
        if (task.status, task.status_message) == owned.heard:
            return
        owned.heard = (task.status, task.status_message)
        status = types.TaskStatusNotification(params=types.TaskStatusNotificationParams(**task.model_dump()))
        try:
            # not in the SDK's union of notifications (Tasks are types only there); it sends any
            await owned.session.send_notification(cast(types.ServerNotification, status))
        except Exception as exc:  # noqa: BLE001 - the host is gone: it polls when it comes back
            log.debug("could not send tasks/status for %s: %r", task_id, exc)
            self.owned.pop(task_id, None)


def requested_ttl(task: Any) -> int | None:
    """The `task` of a tools/call, checked: an object whose `ttl`, if any, is whole milliseconds."""
    if not isinstance(task, Mapping):
        raise MCPError(types.INVALID_PARAMS, 'params.task must be an object, like {"ttl": 60000}.')
    ttl = task.get("ttl")
    if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0):
        raise MCPError(
            types.INVALID_PARAMS, "params.task.ttl must be a whole number of milliseconds, 0 or more."
        )
    return ttl


def execute_args(services: Services, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The `execute_tool` arguments a task-augmented call stands for (a direct tool's included);
    -32601 for a tool that does not run as a task, -32602 for one emceepee does not have or
    arguments that do not fit."""
    target = services.direct.resolve(name) if name not in TOOLS else None
    if target is not None:
        return {"server": target[0], "tool": target[1], "args": arguments or {}}
    if name in TOOLS and name not in TASK_TOOLS:
        raise MCPError(
            types.METHOD_NOT_FOUND,
            f"emceepee's tool '{name}' does not run as a task (its execution.taskSupport is forbidden); "
            "call it without params.task.",
        )
    if name not in TOOLS:
        raise MCPError(
            types.INVALID_PARAMS, f"emceepee has no tool '{name}'.", {"hint": "tools/list shows them."}
        )
    args = arguments or {}
    wrong = schema.problems(args, TOOLS[name].input_schema, root="arguments")
    if wrong:
        raise MCPError(types.INVALID_PARAMS, f"Invalid arguments for {name}:\n- " + "\n- ".join(wrong))
    token = args.get("resume_token")
    if isinstance(token, str) and resume.ours(token):
        raise MCPError(
            types.INVALID_PARAMS,
            "This resume_token names a task emceepee already has; ask tasks/result for that task "
            "(get_task shows its id) instead of starting one.",
        )
    return args


def refuse(exc: EmceepeeError) -> NoReturn:
    """emceepee's error as the JSON-RPC error of a tasks request: -32602 for what the host named
    wrong (an unknown task, one that has ended, a bad cursor), else -32603; the hint in `data`."""
    code = types.INVALID_PARAMS if isinstance(exc, UsageError) else types.INTERNAL_ERROR
    data = {"type": type(exc).__name__, **({"hint": redact(exc.hint)} if exc.hint else {})}
    raise MCPError(code, redact(exc.message), data) from exc
