"""The chain example backend, driven directly with the SDK's client: its suggestions are as documented."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters

from tests.support import EXAMPLES, text_of

pytestmark = pytest.mark.anyio


def chain_backend(record: Path) -> Client:
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(EXAMPLES / "chain.py")],
        env={"EMCEEPEE_EXAMPLE_LOG": str(record)},
    )
    return Client(params, mode="legacy")


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "chain.log"


def suggestion(result: types.CallToolResult, key: str = "nextTool") -> tuple[str, dict[str, Any]] | None:
    found = (result.meta or {}).get(key)
    return None if found is None else (found["tool"], found.get("arguments", {}))


def suggested(result: types.CallToolResult, key: str = "nextTool") -> tuple[str, dict[str, Any]]:
    """The suggestion the result must carry (none fails the test)."""
    found = suggestion(result, key)
    assert found is not None, result
    return found


def called(record: Path) -> list[str]:
    return record.read_text().splitlines() if record.exists() else []


async def listed(client: Client) -> dict[str, types.Tool]:
    return {tool.name: tool for tool in (await client.list_tools()).tools}


async def test_step_a_leads_to_step_b_then_step_c_which_ends_the_chain(record: Path) -> None:
    async with chain_backend(record) as client:
        with anyio.fail_after(30):
            tools = await listed(client)
            trace = []
            call: tuple[str, dict[str, Any]] | None = ("step_a", {"value": "x"})
            while call is not None:
                result = await client.call_tool(*call)
                trace.append((call, result))
                call = suggestion(result)
    assert [step for step, _ in trace] == [
        ("step_a", {"value": "x"}),
        ("step_b", {"value": "x", "via": "step_a"}),
        ("step_c", {"value": "x", "via": "step_b"}),
    ]
    for (tool, args), result in trace:
        jsonschema.validate(args, tools[tool].input_schema)  # every suggestion is valid, as a server MUST
        assert result.structured_content == {"step": tool, "arguments": args}
        assert text_of(result.content[0]) == f"{tool} got {json.dumps(args, sort_keys=True)}"
        assert not result.is_error
    assert trace[-1][1].meta is None
    assert called(record) == [
        f"called {tool} {json.dumps(args, sort_keys=True)}" for (tool, args), _ in trace
    ]


async def test_cycle_y_suggests_the_very_call_that_led_to_it(record: Path) -> None:
    async with chain_backend(record) as client:
        with anyio.fail_after(30):
            first = await client.call_tool("cycle_x", {"n": 1})
            second = await client.call_tool(*suggested(first))
    assert suggestion(first) == ("cycle_y", {"n": 1})
    assert suggestion(second) == ("cycle_x", {"n": 1})


async def test_bad_next_suggests_arguments_that_step_b_refuses(record: Path) -> None:
    async with chain_backend(record) as client:
        with anyio.fail_after(30):
            tools = await listed(client)
            tool, args = suggested(await client.call_tool("bad_next", {}))
            refused = await client.call_tool(tool, args)
    assert (tool, args) == ("step_b", {"value": 42})
    problems = [
        e.message for e in jsonschema.Draft202012Validator(tools["step_b"].input_schema).iter_errors(args)
    ]
    assert any("'via' is a required property" in p for p in problems) and any(
        "not of type 'string'" in p for p in problems
    )
    assert refused.is_error and "invalid arguments for step_b" in text_of(refused.content[0])
    assert called(record) == ["called bad_next {}"]  # step_b ran nothing


async def test_missing_next_suggests_a_tool_the_server_does_not_list(record: Path) -> None:
    async with chain_backend(record) as client:
        with anyio.fail_after(30):
            tools = await listed(client)
            tool, args = suggested(await client.call_tool("missing_next", {}))
            with pytest.raises(MCPError, match="Unknown tool: no_such_tool"):
                await client.call_tool(tool, args)
    assert (tool, args) == ("no_such_tool", {}) and tool not in tools


async def test_openai_next_suggests_under_the_openai_key_only(record: Path) -> None:
    async with chain_backend(record) as client:
        with anyio.fail_after(30):
            result = await client.call_tool("openai_next", {"value": "y"})
    assert suggestion(result, "openai/nextTool") == ("step_b", {"value": "y", "via": "openai_next"})
    assert suggestion(result) is None


async def test_make_draft_leads_to_delete_draft_which_is_annotated_destructive(record: Path) -> None:
    async with chain_backend(record) as client:
        with anyio.fail_after(30):
            tools = await listed(client)
            result = await client.call_tool("make_draft", {"title": "t"})
    assert suggestion(result) == ("delete_draft", {"draft_id": "draft-t"})
    annotations = tools["delete_draft"].annotations
    assert (
        annotations is not None
        and annotations.destructive_hint is True
        and annotations.read_only_hint is False
    )
    assert all(tools[name].annotations is None for name in tools if name != "delete_draft")
    assert called(record) == ['called make_draft {"title": "t"}']  # a suggestion runs nothing by itself


async def test_countdown_is_a_chain_of_n_plus_one_calls(record: Path) -> None:
    async with chain_backend(record) as client:
        with anyio.fail_after(30):
            calls: list[tuple[str, dict[str, Any]]] = []
            call: tuple[str, dict[str, Any]] | None = ("countdown", {"n": 7})
            while call is not None:
                calls.append(call)
                call = suggestion(await client.call_tool(*call))
    assert calls == [("countdown", {"n": n}) for n in range(7, -1, -1)]  # 8 calls: deeper than 5


async def test_fail_next_is_a_tool_error_that_still_suggests_a_next_tool(record: Path) -> None:
    async with chain_backend(record) as client:
        with anyio.fail_after(30):
            result = await client.call_tool("fail_next", {})
    assert result.is_error
    assert suggestion(result) == ("step_c", {"value": "recovered", "via": "fail_next"})
