"""The "tasks" example backend, driven directly: tools that run as MCP tasks (2025-11-25)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, MCPError
from mcp.client.extension import NotificationBinding
from mcp.client.session import ClientRequestContext
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from tests.examples.direct import direct, events, raw_session

pytestmark = pytest.mark.anyio

RELATED_TASK = "io.modelcontextprotocol/related-task"


async def start(
    dispatcher: JSONRPCDispatcher, tool: str, args: dict[str, Any], ttl: int = 60_000, **meta: Any
) -> types.Task:
    """A task-augmented tools/call, sent past the session (which would check it as a CallToolResult)."""
    params: dict[str, Any] = {"name": tool, "arguments": args, "task": {"ttl": ttl}}
    if meta:
        params["_meta"] = meta
    raw = await dispatcher.send_raw_request("tools/call", params)
    return types.CreateTaskResult.model_validate(raw).task


async def get(session: ClientSession, task_id: str) -> types.GetTaskResult:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await session.send_request(request, types.GetTaskResult)


async def result(session: ClientSession, task_id: str) -> types.CallToolResult:
    request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    return await session.send_request(request, types.CallToolResult)


async def cancel(session: ClientSession, task_id: str) -> types.CancelTaskResult:
    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    return await session.send_request(request, types.CancelTaskResult)


async def list_tasks(session: ClientSession, cursor: str | None = None) -> types.ListTasksResult:
    request = types.ListTasksRequest(params=types.PaginatedRequestParams(cursor=cursor))
    return await session.send_request(request, types.ListTasksResult)


def text(res: types.CallToolResult) -> str:
    block = res.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_it_declares_tasks_and_each_tools_task_support() -> None:
    async with direct("tasks.py") as client:
        with anyio.fail_after(20):
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            plain = await client.call_tool("summarize", {"text": "one two three", "seconds": 0})
            tasks = client.server_capabilities.tasks
    assert tasks is not None and tasks.list is not None and tasks.cancel is not None
    assert (
        tasks.requests is not None
        and tasks.requests.tools is not None
        and tasks.requests.tools.call is not None
    )
    assert tools["research"].execution == types.ToolExecution(task_support="required")
    assert tools["summarize"].execution == types.ToolExecution(task_support="optional")
    assert tools["quick"].execution is None
    assert text(plain) == "summary: one two three"


async def test_a_required_tool_refuses_a_plain_call_and_a_forbidden_one_refuses_a_task() -> None:
    async with raw_session("tasks.py") as (session, dispatcher):
        with anyio.fail_after(20):
            with pytest.raises(MCPError) as plain:
                await session.call_tool("research", {"topic": "owls"})
            with pytest.raises(MCPError) as augmented:
                await start(dispatcher, "quick", {"text": "hi"})
    assert plain.value.code == types.METHOD_NOT_FOUND and "requires task augmentation" in plain.value.message
    assert augmented.value.code == types.METHOD_NOT_FOUND


async def test_a_research_task_reports_its_stages_and_ends_at_the_nth_poll(tmp_path: Path) -> None:
    log = tmp_path / "backend.log"
    statuses: list[tuple[str, str | None]] = []
    progress: list[tuple[float, str | None]] = []
    completed, all_progress = anyio.Event(), anyio.Event()

    async def on_status(params: types.TaskStatusNotificationParams) -> None:
        statuses.append((params.status, params.status_message))
        if params.status == "completed":
            completed.set()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification) and message.params.progress_token == "tok-7":
            progress.append((message.params.progress, message.params.message))
            if message.params.progress == 4:
                all_progress.set()

    binding = NotificationBinding(
        method="notifications/tasks/status", params_type=types.TaskStatusNotificationParams, handler=on_status
    )
    async with raw_session("tasks.py", log, message_handler=on_message, notification_bindings=[binding]) as (
        session,
        dispatcher,
    ):
        with anyio.fail_after(20):
            task = await start(dispatcher, "research", {"topic": "owls", "polls": 4}, progressToken="tok-7")
            polls = [await get(session, task.task_id) for _ in range(4)]
            final = await result(session, task.task_id)
            # Notifications are delivered on tasks of their own, so they may trail the results.
            await completed.wait()
            await all_progress.wait()
    assert task.status == "working" and task.ttl == 60_000 and task.poll_interval == 200
    assert [p.status for p in polls] == ["working", "working", "working", "completed"]
    assert polls[0].status_message == "gathering sources (1/4)"
    assert text(final) == "report on owls: 4 stages done"
    assert final.structured_content is not None and final.structured_content["topic"] == "owls"
    assert final.meta == {RELATED_TASK: {"taskId": task.task_id}}
    assert ("working", "synthesizing (3/4)") in statuses and ("completed", None) in statuses
    assert sorted(p for p, _ in progress) == [0, 1, 2, 3, 4]
    assert events(log) == [f"started research {task.task_id}", f"finished research {task.task_id} completed"]


async def test_an_optional_tool_runs_as_a_task_and_a_failing_one_ends_failed() -> None:
    async with raw_session("tasks.py") as (session, dispatcher):
        with anyio.fail_after(20):
            good = await start(dispatcher, "summarize", {"text": "a b c d e f g", "seconds": 0})
            bad = await start(dispatcher, "summarize", {"text": "x", "seconds": 0, "fail": True})
            good_result, bad_result = await result(session, good.task_id), await result(session, bad.task_id)
            bad_state = await get(session, bad.task_id)
    assert text(good_result) == "summary: a b c d e"
    assert bad_result.is_error and bad_state.status == "failed"


async def test_a_task_can_be_cancelled_once(tmp_path: Path) -> None:
    log = tmp_path / "backend.log"
    async with raw_session("tasks.py", log) as (session, dispatcher):
        with anyio.fail_after(20):
            task = await start(dispatcher, "research", {"topic": "owls", "seconds": 600})
            cancelled = await cancel(session, task.task_id)
            state = await get(session, task.task_id)
            final = await result(session, task.task_id)
            with pytest.raises(MCPError) as again:
                await cancel(session, task.task_id)
    assert cancelled.status == "cancelled" and state.status == "cancelled"
    assert final.is_error and "was cancelled" in text(final)
    assert again.value.code == types.INVALID_PARAMS
    assert f"cancelled research {task.task_id}" in events(log)
    assert not any(line.startswith("finished") for line in events(log))


async def test_tasks_are_listed_in_pages_and_unknown_ids_are_invalid_params() -> None:
    async with raw_session("tasks.py") as (session, dispatcher):
        with anyio.fail_after(20):
            ids = [
                (await start(dispatcher, "summarize", {"text": str(n), "seconds": 0})).task_id
                for n in range(3)
            ]
            first = await list_tasks(session)
            second = await list_tasks(session, first.next_cursor)
            with pytest.raises(MCPError) as unknown:
                await get(session, "no-such-task")
            with pytest.raises(MCPError) as bad_cursor:
                await list_tasks(session, "not-a-cursor")
            long_lived = await start(dispatcher, "summarize", {"text": "x", "seconds": 0}, ttl=10**9)
    assert [t.task_id for t in first.tasks + second.tasks] == ids
    assert first.next_cursor is not None and second.next_cursor is None
    assert unknown.value.code == types.INVALID_PARAMS and bad_cursor.value.code == types.INVALID_PARAMS
    assert long_lived.ttl == 600_000  # the receiver grants at most 10 minutes


async def test_an_ambiguous_research_task_asks_the_client_through_the_task() -> None:
    asked: list[tuple[str, Any]] = []

    async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        asked.append((params.message, (ctx.meta or {}).get(RELATED_TASK)))
        return types.ElicitResult(action="accept", content={"interpretation": "historical"})

    async with raw_session("tasks.py", elicitation_callback=on_elicit) as (session, dispatcher):
        with anyio.fail_after(20):
            task = await start(dispatcher, "research", {"topic": "python", "seconds": 0, "ambiguous": True})
            final = await result(session, task.task_id)
    assert asked == [("'python' is ambiguous: which meaning do you want?", {"taskId": task.task_id})]
    assert text(final) == "report on python (historical): 4 stages done"
