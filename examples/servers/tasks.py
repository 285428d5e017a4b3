"""Example backend "tasks": a handshake-era server whose tools run as MCP tasks (protocol 2025-11-25).

emceepee's tests spawn it as ``python examples/servers/tasks.py``. It speaks MCP over stdio
and declares the server ``tasks`` capability {list, cancel, requests.tools.call}.

Tools
    research(topic, seconds=2, polls?, ambiguous=false)    execution.taskSupport = "required"
        A slow research-like job in four stages. It must be called task-augmented (``task``
        in the tools/call params); a plain call gets -32601. Each stage updates the task's
        statusMessage ("reading sources (2/4)"), sends notifications/tasks/status and, when
        the call carried a progressToken, notifications/progress with that token.
        The job takes ``seconds``; with ``polls=N`` it ignores time and finishes at the N-th
        tasks/get instead (that tasks/get already reports "completed"), for tests without timing.
        With ``ambiguous=true`` (and a client that declared elicitation) the task moves to
        input_required and sends a form elicitation/create tagged with the related task;
        the chosen interpretation goes into the report.
        Result: text "report on <topic> ..." and structured {"topic", "stages", "clarification"}.
    summarize(text, seconds=0.2, fail=false)    execution.taskSupport = "optional"
        "summary: <first words of text>" after ``seconds``, as a plain call or as a task.
        ``fail=true`` gives an isError result (a task then ends "failed").
    quick(text)    no execution field (task support "forbidden"); a task-augmented call gets -32601.

Task requests
    tasks/get, tasks/result (blocks until the task is terminal), tasks/cancel (-32602 for a
    terminal or unknown task), tasks/list (two tasks per page, opaque nextCursor).
    A task lives ``task.ttl`` ms (default 60 s, at most 10 min; the granted ttl is returned).
    The first request that finds it past its ttl forgets it (-32602 "... has expired") and
    stops its job if it is still running.
    tasks/result of a cancelled task is an isError result "task <id> was cancelled".

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, jobs append lines there:
    started <tool> <task_id> | finished <tool> <task_id> <status> | cancelled <tool> <task_id>

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import anyio.abc
import jsonschema
import mcp_types as types
from _example import append_event, serve, text_result
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext
from mcp.server.session import ServerSession

NAME = "tasks"
log = logging.getLogger(NAME)

RELATED_TASK = "io.modelcontextprotocol/related-task"
POLL_INTERVAL_MS = 200
DEFAULT_TTL_MS = 60_000
MAX_TTL_MS = 600_000
PAGE_SIZE = 2
STAGES = ("gathering sources", "reading sources", "synthesizing", "writing the report")
TERMINAL = frozenset({"completed", "failed", "cancelled"})


def now() -> datetime:
    return datetime.now(UTC)


def stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass
class Job:
    """One task: its state on the wire, and the handles of the work behind it."""

    task_id: str
    tool: str
    ttl_ms: int
    session: ServerSession  # from the creating call; later sends use the connection's standalone channel
    progress_token: str | int | None
    created: datetime = field(default_factory=now)
    updated: datetime = field(default_factory=now)
    status: str = "working"
    message: str | None = None
    result: types.CallToolResult | None = None
    polls: int = 0
    finish_at_poll: int | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    polled: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def wire(self) -> dict[str, Any]:
        # A dict, not types.Task: the spec wants "ttl" present even when null.
        task: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": stamp(self.created),
            "lastUpdatedAt": stamp(self.updated),
            "ttl": self.ttl_ms,
            "pollInterval": POLL_INTERVAL_MS,
        }
        if self.message is not None:
            task["statusMessage"] = self.message
        return task

    def expired(self) -> bool:
        return (now() - self.created).total_seconds() * 1000 > self.ttl_ms

    async def set_status(self, status: str, message: str | None) -> None:
        if self.status in TERMINAL:
            return  # a cancelled task stays cancelled even if its work still finishes
        self.status, self.message, self.updated = status, message, now()
        notification = types.TaskStatusNotification(params=types.TaskStatusNotificationParams(**self.wire()))
        await self.session.send_notification(notification)

    async def progress(self, done: int, total: int, message: str) -> None:
        if self.progress_token is not None:
            await self.session.send_progress_notification(self.progress_token, done, total, message)

    async def wait_for_polls(self, count: int) -> None:
        while self.polls < count:
            self.polled = anyio.Event()
            await self.polled.wait()

    async def ask(self, message: str, schema: dict[str, Any]) -> types.ElicitResult | None:
        """Ask the client for input on behalf of this task (None if the client cannot be asked)."""
        caps = self.session.client_capabilities
        if not (caps and caps.elicitation):
            return None
        await self.set_status("input_required", message)
        params = types.ElicitRequestFormParams(
            message=message, requested_schema=schema, meta={RELATED_TASK: {"taskId": self.task_id}}
        )
        try:
            answer = await self.session.send_request(types.ElicitRequest(params=params), types.ElicitResult)
        except MCPError as exc:
            log.warning("elicitation for task %s failed: %s", self.task_id, exc.message)
            answer = None
        await self.set_status("working", "continuing")
        return answer


Work = Callable[[Job | None, dict[str, Any]], Awaitable[types.CallToolResult]]


# --------------------------------------------------------------------------- tools


async def research(job: Job | None, args: dict[str, Any]) -> types.CallToolResult:
    assert job is not None  # taskSupport "required": only ever run as a task
    topic: str = args["topic"]
    polls: int | None = args.get("polls")
    seconds: float = args.get("seconds", 2)
    clarification: str | None = None
    job.finish_at_poll = polls
    for number, stage in enumerate(STAGES, 1):
        await job.set_status("working", f"{stage} ({number}/{len(STAGES)})")
        await job.progress(number - 1, len(STAGES), stage)
        if number == 3 and args.get("ambiguous"):
            clarification = await clarify(job, topic)
        if polls is not None:
            await job.wait_for_polls(math.ceil(polls * number / len(STAGES)))
        else:
            await anyio.sleep(seconds / len(STAGES))
    await job.progress(len(STAGES), len(STAGES), "done")
    about = f" ({clarification})" if clarification else ""
    report = {"topic": topic, "stages": list(STAGES), "clarification": clarification}
    return text_result(f"report on {topic}{about}: {len(STAGES)} stages done", structured=report)


async def clarify(job: Job, topic: str) -> str | None:
    schema = {
        "type": "object",
        "properties": {
            "interpretation": {
                "type": "string",
                "title": "Which meaning?",
                "oneOf": [
                    {"const": "technical", "title": "Technical"},
                    {"const": "historical", "title": "Historical"},
                ],
            }
        },
        "required": ["interpretation"],
    }
    answer = await job.ask(f"'{topic}' is ambiguous: which meaning do you want?", schema)
    if answer is None or answer.action != "accept" or not answer.content:
        return None
    value = answer.content.get("interpretation")
    return value if isinstance(value, str) else None


async def summarize(job: Job | None, args: dict[str, Any]) -> types.CallToolResult:
    await anyio.sleep(args.get("seconds", 0.2))
    if args.get("fail"):
        return text_result("summarize failed on request", is_error=True)
    words = args["text"].split()
    return text_result("summary: " + " ".join(words[:5]))


async def quick(job: Job | None, args: dict[str, Any]) -> types.CallToolResult:
    return text_result(args["text"])


def tool(
    name: str, description: str, properties: dict[str, Any], required: list[str], support: str | None
) -> types.Tool:
    return types.Tool(
        name=name,
        description=description,
        input_schema={"type": "object", "properties": properties, "required": required},
        execution=types.ToolExecution(task_support=support) if support else None,
    )


RESEARCH = tool(
    "research",
    "Research a topic in four stages (slow). Must be called as a task.",
    {
        "topic": {"type": "string"},
        "seconds": {"type": "number", "minimum": 0, "default": 2},
        "polls": {"type": "integer", "minimum": 1},
        "ambiguous": {"type": "boolean", "default": False},
    },
    ["topic"],
    "required",
)
SUMMARIZE = tool(
    "summarize",
    "Summarize text; may be called as a task.",
    {
        "text": {"type": "string"},
        "seconds": {"type": "number", "minimum": 0, "default": 0.2},
        "fail": {"type": "boolean", "default": False},
    },
    ["text"],
    "optional",
)
QUICK = tool(
    "quick", "Return the text at once (never as a task).", {"text": {"type": "string"}}, ["text"], None
)
TOOLS: dict[str, tuple[types.Tool, Work]] = {
    spec.name: (spec, work) for spec, work in ((RESEARCH, research), (SUMMARIZE, summarize), (QUICK, quick))
}


def checked(params: types.CallToolRequestParams) -> tuple[types.Tool, Work, dict[str, Any]]:
    entry = TOOLS.get(params.name)
    if entry is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
    args = params.arguments or {}
    problems = [e.message for e in jsonschema.Draft202012Validator(entry[0].input_schema).iter_errors(args)]
    if problems:
        raise MCPError(types.INVALID_PARAMS, f"invalid arguments for {params.name}: {'; '.join(problems)}")
    return entry[0], entry[1], args


def task_support(spec: types.Tool) -> str:
    return (spec.execution.task_support if spec.execution else None) or "forbidden"


# --------------------------------------------------------------------------- the task store


class Tasks:
    """The tasks of one connection, and the task group their jobs run in."""

    def __init__(self, group: anyio.abc.TaskGroup) -> None:
        self.group = group
        self.jobs: dict[str, Job] = {}

    def get(self, task_id: str) -> Job:
        job = self.jobs.get(task_id)
        if job is not None and job.expired():
            del self.jobs[task_id]
            job.scope.cancel()
            raise MCPError(types.INVALID_PARAMS, f"Failed to retrieve task: task {task_id} has expired")
        if job is None:
            raise MCPError(types.INVALID_PARAMS, f"Failed to retrieve task: no task {task_id}")
        return job

    def start(self, ctx: ServerRequestContext[Tasks], params: types.CallToolRequestParams) -> Job:
        spec, work, args = checked(params)
        if task_support(spec) == "forbidden":
            raise MCPError(types.METHOD_NOT_FOUND, f"Tool {spec.name} does not support task augmentation")
        requested = params.task.ttl if params.task and params.task.ttl is not None else DEFAULT_TTL_MS
        job = Job(
            task_id=uuid.uuid4().hex,
            tool=spec.name,
            ttl_ms=max(1, min(requested, MAX_TTL_MS)),
            session=ctx.session,
            progress_token=(ctx.meta or {}).get("progress_token"),
        )
        self.jobs[job.task_id] = job
        self.group.start_soon(self.run, job, work, args, name=f"task {job.task_id}")
        return job

    async def run(self, job: Job, work: Work, args: dict[str, Any]) -> None:
        append_event(f"started {job.tool} {job.task_id}")
        with job.scope:
            try:
                result = await work(job, args)
            except Exception as exc:  # a failing job ends its task, not the server
                log.exception("task %s failed", job.task_id)
                result = text_result(f"{job.tool} failed: {exc}", is_error=True)
            job.result = result
            await job.set_status("failed" if result.is_error else "completed", None)
            append_event(f"finished {job.tool} {job.task_id} {job.status}")
        job.done.set()

    async def cancel(self, job: Job) -> None:
        if job.status in TERMINAL:
            raise MCPError(types.INVALID_PARAMS, f"Task {job.task_id} is already {job.status}")
        await job.set_status("cancelled", "cancelled by request")
        job.result = text_result(f"task {job.task_id} was cancelled", is_error=True)
        job.scope.cancel()
        append_event(f"cancelled {job.tool} {job.task_id}")
        job.done.set()


@asynccontextmanager
async def lifespan(server: Server[Tasks]) -> AsyncIterator[Tasks]:
    async with anyio.create_task_group() as group:
        yield Tasks(group)
        group.cancel_scope.cancel()


# --------------------------------------------------------------------------- handlers


async def task_augmentation(ctx: ServerRequestContext[Tasks], call_next: CallNext) -> Any:
    """Answer a task-augmented tools/call with CreateTaskResult.

    The low-level Server checks a tools/call result against CallToolResult, which a
    CreateTaskResult is not, so the answer is given here, before that check, as a plain dict.
    """
    if ctx.method != "tools/call" or not isinstance(ctx.params, Mapping) or ctx.params.get("task") is None:
        return await call_next(ctx)
    params = types.CallToolRequestParams.model_validate(ctx.params, by_name=False)
    job = ctx.lifespan_context.start(ctx, params)
    return {"task": job.wire()}


async def on_list_tools(
    ctx: ServerRequestContext[Tasks], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[spec for spec, _ in TOOLS.values()])


async def on_call_tool(
    ctx: ServerRequestContext[Tasks], params: types.CallToolRequestParams
) -> types.CallToolResult:
    spec, work, args = checked(params)
    if task_support(spec) == "required":
        raise MCPError(
            types.METHOD_NOT_FOUND, f"Tool {spec.name} requires task augmentation (execution.taskSupport)"
        )
    return await work(None, args)


async def on_get_task(ctx: ServerRequestContext[Tasks], params: types.GetTaskRequestParams) -> dict[str, Any]:
    job = ctx.lifespan_context.get(params.task_id)
    job.polls += 1
    job.polled.set()
    if job.finish_at_poll is not None and job.polls >= job.finish_at_poll:
        # Poll-driven jobs finish without waiting on anything else: let this poll report it.
        with anyio.move_on_after(5):
            await job.done.wait()
    return job.wire()


async def on_task_result(
    ctx: ServerRequestContext[Tasks], params: types.GetTaskPayloadRequestParams
) -> dict[str, Any]:
    job = ctx.lifespan_context.get(params.task_id)
    await job.done.wait()
    assert job.result is not None
    result = job.result.model_dump(by_alias=True, mode="json", exclude_none=True)
    result["_meta"] = {**result.get("_meta", {}), RELATED_TASK: {"taskId": job.task_id}}
    return result


async def on_cancel_task(
    ctx: ServerRequestContext[Tasks], params: types.CancelTaskRequestParams
) -> dict[str, Any]:
    job = ctx.lifespan_context.get(params.task_id)
    await ctx.lifespan_context.cancel(job)
    return job.wire()


async def on_list_tasks(
    ctx: ServerRequestContext[Tasks], params: types.PaginatedRequestParams
) -> dict[str, Any]:
    store = ctx.lifespan_context
    live = []
    for task_id in list(store.jobs):
        try:
            live.append(store.get(task_id))
        except MCPError:
            continue  # expired
    start = 0
    if params.cursor is not None:
        if not params.cursor.isdigit() or int(params.cursor) > len(live):
            raise MCPError(types.INVALID_PARAMS, f"Invalid cursor: {params.cursor}")
        start = int(params.cursor)
    page = live[start : start + PAGE_SIZE]
    result: dict[str, Any] = {"tasks": [job.wire() for job in page]}
    if start + PAGE_SIZE < len(live):
        result["nextCursor"] = str(start + PAGE_SIZE)
    return result


server: Server[Tasks] = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: tools that run as MCP tasks (2025-11-25).",
    lifespan=lifespan,
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
)
server.middleware.append(task_augmentation)
server.add_request_handler("tasks/get", types.GetTaskRequestParams, on_get_task)
server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, on_task_result)
server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, on_cancel_task)
server.add_request_handler("tasks/list", types.PaginatedRequestParams, on_list_tasks)

TASKS_CAPABILITY = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(
        tools=types.TasksToolsCapability(call=types.TasksCallCapability())
    ),
)


if __name__ == "__main__":
    # create_initialization_options() derives capabilities from handlers and knows nothing of
    # tasks, so serve() is given options with the tasks capability added.
    serve(server, tasks=TASKS_CAPABILITY)
