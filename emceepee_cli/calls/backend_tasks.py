"""Backend tools that run as MCP tasks (protocol 2025-11-25, `execution.taskSupport`).

A tool whose `taskSupport` is `required` refuses a plain `tools/call`. emceepee calls it
task-augmented: the backend answers at once with a task; emceepee then waits on `tasks/result`
(which blocks until the task is terminal) while it polls `tasks/get` and turns each new status
message into progress. For the host this is an ordinary emceepee call — promoted to an emceepee
task when slow, cancelled with `cancel_task` (sent on as `tasks/cancel`). Tools that are
`optional` are called plainly: emceepee already turns slow calls into tasks itself.

The session's own `send_request` would check the task-augmented reply as a `CallToolResult`, so
that one request goes through the connection's dispatcher (kept by the `Backend`).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, MCPError
from mcp.shared.dispatcher import CallOptions
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER

from emceepee_cli.backends.backend import Backend
from emceepee_cli.calls.call import ProgressFn
from emceepee_cli.errors import BackendError, hints, logs_step

log = logging.getLogger(__name__)

POLL_MIN_S = 0.5
POLL_MAX_S = 5.0
CANCEL_WAIT_S = 5.0
CREATE_WAIT_S = 30.0  # for the backend's CreateTaskResult


def runs_as_task(backend: Backend, tool: str) -> bool:
    """The backend lists `tool` as callable only as a task."""
    listed = backend.offer.tools.get(tool)
    execution = listed.execution if listed is not None else None
    return execution is not None and execution.task_support == "required"


def can_run_tasks(session: ClientSession) -> bool:
    caps = session.server_capabilities
    tasks = caps.tasks if caps is not None else None
    requests = tasks.requests if tasks is not None else None
    return requests is not None and requests.tools is not None and requests.tools.call is not None


async def call(
    backend: Backend,
    session: ClientSession,
    tool: str,
    args: dict[str, Any] | None,
    ttl_s: float,
    on_status: ProgressFn,
) -> types.CallToolResult:
    """Run `tool` as a backend task kept `ttl_s`; its result once the task is terminal. Cancelled,
    it cancels the backend's task too."""
    server, dispatcher = backend.name, backend.dispatcher
    if dispatcher is None or not can_run_tasks(session):
        raise BackendError(
            f"Backend '{server}' lists tool '{tool}' as runnable only as a task, but does not declare "
            "the tasks capability (tasks.requests.tools.call), so it cannot be called.",
            hint=f"This is a fault in '{server}'; ask its maintainers, or use another tool.",
        )
    opts: CallOptions = {}
    if session.protocol_version:  # over Streamable HTTP every request carries the version header
        opts["headers"] = {MCP_PROTOCOL_VERSION_HEADER: session.protocol_version}
    params = {"name": tool, "arguments": args or {}, "task": {"ttl": int(ttl_s * 1000)}}
    # The backend creates its task before it answers: a cancel that came now would leave that task
    # running unseen, so the answer is awaited (bounded) and a cancel lands just after it.
    with anyio.CancelScope(shield=True), anyio.move_on_after(CREATE_WAIT_S) as waited:
        raw = await dispatcher.send_raw_request("tools/call", params, opts)
    if waited.cancelled_caught:
        raise BackendError(
            f"Backend '{server}' did not answer the task-augmented tools/call '{tool}' within "
            f"{CREATE_WAIT_S:g} s (a task should be created at once).",
            **hints(f"This is a fault in '{server}'; its stderr is in its log: {{}}.", logs_step(server)),
        )
    task = types.CreateTaskResult.model_validate(raw).task
    log.debug("backend %s: %s runs as task %s", server, tool, task.task_id)
    finished = False
    try:
        await anyio.lowlevel.checkpoint()  # a cancel that came while the task was created lands here
        async with anyio.create_task_group() as tg:
            tg.start_soon(_poll, session, task, on_status)
            request = types.GetTaskPayloadRequest(
                params=types.GetTaskPayloadRequestParams(task_id=task.task_id)
            )
            result = await session.send_request(request, types.CallToolResult)
            finished = True
            tg.cancel_scope.cancel()
        return result
    finally:
        if not finished:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WAIT_S):
                await _cancel(server, session, task.task_id)


async def _poll(session: ClientSession, task: types.Task, on_status: ProgressFn) -> None:
    """Follow the task's status messages as progress, at the pace the backend asks for."""
    told = 0
    last = task.status_message
    while True:
        wait_s = (task.poll_interval or 0) / 1000
        await anyio.sleep(min(max(wait_s, POLL_MIN_S), POLL_MAX_S))
        request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task.task_id))
        try:
            task = await session.send_request(request, types.GetTaskResult)
        except MCPError as exc:  # gone or expired: tasks/result will say how it ended
            log.debug("tasks/get %s: %s", task.task_id, exc.message)
            return
        if task.status_message and task.status_message != last:
            last, told = task.status_message, told + 1
            await on_status(float(told), None, f"{task.status}: {last}")
        if task.status in ("completed", "failed", "cancelled"):
            return


async def _cancel(server: str, session: ClientSession, task_id: str) -> None:
    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    try:
        await session.send_request(request, types.CancelTaskResult)
    except MCPError as exc:  # -32602: it had already ended
        log.debug("backend %s: tasks/cancel %s: %s", server, task_id, exc.message)
    except Exception as exc:  # noqa: BLE001 - the backend may be gone; the local call is cancelled anyway
        log.warning("backend %s: tasks/cancel %s failed: %r", server, task_id, exc)
