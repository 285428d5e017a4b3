"""A backend's question reaches a host that can answer it, on any call of the session, over the real
`serve` process; one that cannot be forwarded is parked and the reason logged; a host answer that
fails the question's schema is reported to the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.support import envelope, example_table, payload, serving, still_answering, texts, write_config

pytestmark = pytest.mark.anyio


def make_config(tmp_path: Path, policy: str = "auto", sampling: bool = False) -> Path:
    """elicit; sampling (an SDK backend, a second of CPU to start) only where it is called."""
    env = {"EMCEEPEE_EXAMPLE_LOG": str(tmp_path / "backend.log")}
    return write_config(
        tmp_path / "config.toml",
        f'[defaults]\nelicitation = "{policy}"\nsampling = "{policy}"\n',
        example_table("elicit", "elicit.py", env=env),
        example_table("sampling", "sampling.py", env=env) if sampling else "",
    )


async def warm_up(client: Client) -> None:
    """What a host does before it calls a backend tool: list, look around."""
    await client.list_tools()
    await client.call_tool("list_servers", {})
    await client.call_tool("list_tools", {})
    await client.call_tool("list_tasks", {})
    await client.call_tool("get_logs", {})


def call(server: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"server": server, "tool": tool, "args": args, "timeout_ms": 20_000}


@pytest.mark.parametrize("policy", ["auto", "forward"])
async def test_every_question_reaches_a_host_that_can_answer_after_other_calls(
    tmp_path: Path, policy: str
) -> None:
    asked: list[str] = []

    async def form(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if isinstance(params, types.ElicitRequestURLParams):
            asked.append(params.url)
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": f"Bo{len(asked)}"})

    async def sample(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text="short"), model="host-model"
        )

    async with serving(
        make_config(tmp_path, policy, sampling=True), elicitation_callback=form, sampling_callback=sample
    ) as c:
        with anyio.fail_after(60):
            await warm_up(c)
            first = await c.call_tool("execute_tool", call("elicit", "ask", {"question": "Name?"}))
            second = await c.call_tool("execute_tool", call("elicit", "ask", {"question": "Again?"}))
            url = await c.call_tool("execute_tool", call("elicit", "ask_url", {}))
            summary = await c.call_tool("execute_tool", call("sampling", "summarize", {"text": "a story"}))
            tasks = payload(await c.call_tool("list_tasks", {"include_completed": True}))
            await still_answering(c)
    assert texts(first) == ["hello Bo1"] and texts(second) == ["hello Bo2"]
    assert texts(url) == ["accept"] and texts(summary) == ["summary: short"]
    assert asked == [
        "Name?",
        "Again?",
        "Please authorize the example app in your browser.",
        "https://example.com/authorize?x=1",
        "sampling",
    ]
    assert tasks == {"tasks": []}  # every answer came inside its call: nothing was parked


async def test_a_question_that_cannot_be_forwarded_is_parked_and_the_reason_logged(tmp_path: Path) -> None:
    async with serving(make_config(tmp_path)) as c:  # a host without elicitation or sampling
        with anyio.fail_after(60):
            await warm_up(c)
            promoted = payload(await c.call_tool("execute_tool", call("elicit", "ask", {"question": "Q?"})))
            logs = payload(await c.call_tool("get_logs", {"server": "elicit"}))
            await c.call_tool("cancel_task", {"task_id": promoted["proxy_task"]["task_id"]})
    assert promoted["saga"]["steps"][0]["type"] == "elicitation"
    messages = [entry["message"] for entry in logs["logs"]]
    assert any(
        "elicitation request not forwarded to the host: the host did not declare the elicitation capability"
        in m
        for m in messages
    ), messages


async def test_a_host_answer_that_fails_the_schema_is_reported_to_the_model(tmp_path: Path) -> None:
    async def bad_form(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"age": 3})  # no name: the schema requires it

    async with serving(make_config(tmp_path), elicitation_callback=bad_form) as c:
        with anyio.fail_after(60):
            await warm_up(c)
            reply = await c.call_tool("execute_tool", call("elicit", "ask", {"question": "Q?"}))
            task_id = payload(reply)["proxy_task"]["task_id"]
            events = envelope(reply).get("events_since_last_response", [])
            while not (refused := [e for e in events if e["type"] == "host_answer_refused"]):
                events = payload(await c.call_tool("await_activity", {"timeout_ms": 5000}))["events"]
            [step] = payload(await c.call_tool("get_elicitations", {}))["elicitations"]
            await c.call_tool(
                "respond_to_elicitation",
                {"request_id": step["request_id"], "action": "accept", "content": {"name": "Model"}},
            )
            result = await c.call_tool("get_task_result", {"task_id": task_id})
    [event] = refused
    assert event["data"]["request_id"] == step["request_id"] and event["data"]["task_id"] == task_id
    assert "'name' is a required property" in event["data"]["error"]
    assert texts(result) == ["hello Model"]
