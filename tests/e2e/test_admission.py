"""One rule admits a call of a backend's tool, through a real `emceepee serve`: the config's deny, then
the backend's listing, then the tool's input schema. `execute_tool` raises the refusal (at once, or
once a backend still starting is up); a chain stops before the next tool with it. Either way the
refused call never reaches the backend. (`emceepee call` is held to the same rule in
tests/cli/test_call.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.support import (
    example_table,
    hostile_table,
    payload,
    serving,
    still_answering,
    texts,
    until_ready,
    write_config,
)

pytestmark = pytest.mark.anyio

DENIED = (
    "chain.delete_draft is denied by emceepee's config "
    "([servers.chain] tools.deny = ['delete_*'] ('delete_*' matches)). Nothing was sent."
)
ASK_THE_USER = "Ask the user to change the config if it should be callable."


def chain_config(tmp_path: Path, record: Path) -> Path:
    table = example_table(
        "chain", "chain.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}, tools={"deny": ["delete_*"]}
    )
    return write_config(tmp_path / "config.toml", table)


def called(record: Path) -> list[str]:
    return [line.split(" ", 2)[1] for line in record.read_text().splitlines()] if record.exists() else []


def error_of(result: Any) -> dict[str, Any]:
    assert result.is_error, result
    error: dict[str, Any] = result.structured_content["error"]
    return error


def stop_of(result: Any) -> dict[str, Any]:
    """The `tool_chain` block's `stopped` of a chain's last result."""
    for text in texts(result):
        if text.startswith('{"tool_chain"'):
            stopped: dict[str, Any] = json.loads(text)["tool_chain"]["stopped"]
            return stopped
    raise AssertionError(f"no tool_chain block in {texts(result)}")


async def execute(client: Client, server: str, tool: str, args: dict[str, Any], **more: Any) -> Any:
    return await client.call_tool("execute_tool", {"server": server, "tool": tool, "args": args, **more})


async def test_execute_tool_refuses_a_denied_an_unlisted_and_a_mistyped_call_each_saying_why(
    tmp_path: Path,
) -> None:
    record = tmp_path / "chain.log"
    async with serving(chain_config(tmp_path, record)) as client:
        with anyio.fail_after(30):
            await until_ready(client, "chain")
            denied = error_of(await execute(client, "chain", "delete_draft", {"draft_id": "d"}))
            unlisted = error_of(await execute(client, "chain", "step_d", {}))
            mistyped = error_of(await execute(client, "chain", "step_b", {"value": 42}))
            await still_answering(client)
    assert denied == {"type": "ToolDenied", "message": DENIED, "hint": ASK_THE_USER}
    assert unlisted == {
        "type": "NotFound",
        "message": "Backend 'chain' has no tool 'step_d'. Did you mean: step_c, step_b, step_a?",
        "hint": "List its tools with list_tools(server='chain').",
    }
    assert mistyped == {
        "type": "UsageError",
        "message": "Arguments for chain.step_b do not match its input schema:\n"
        "- args: 'via' is a required property\n- args.value: 42 is not of type 'string'",
        "hint": "Nothing was sent to 'chain'. Fix the fields named; "
        "list_tools(server='chain') shows the schema.",
    }
    assert called(record) == []


async def test_a_call_to_a_backend_still_starting_is_refused_by_the_same_rule(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    table = hostile_table("late", "--start-when", str(gate), tools={"deny": ["pid"]})
    async with serving(write_config(tmp_path / "config.toml", table)) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_servers", {})
            denied = error_of(await execute(client, "late", "pid", {}, timeout_ms=0))
            tasks = payload(await client.call_tool("list_tasks", {}))["tasks"]
            unlisted = payload(await execute(client, "late", "nope", {}, timeout_ms=0))["proxy_task"]
            mistyped = payload(await execute(client, "late", "echo", {"text": 5}, timeout_ms=0))["proxy_task"]
            gate.touch()
            unlisted_end = error_of(
                await client.call_tool("get_task_result", {"task_id": unlisted["task_id"]})
            )
            mistyped_end = error_of(
                await client.call_tool("get_task_result", {"task_id": mistyped["task_id"]})
            )
            await still_answering(client)
    assert denied["type"] == "ToolDenied" and denied["message"].startswith("late.pid is denied")
    assert tasks == []  # refused before any wait: no task was made for it
    assert "Backend 'late' has no tool 'nope'." in unlisted_end["message"]
    assert (
        "Arguments for late.echo do not match its input schema:\n- args.text: 5 is not of type 'string'"
        in (mistyped_end["message"])
    )


async def test_a_chain_stops_before_a_denied_an_unlisted_or_a_mistyped_next_tool(tmp_path: Path) -> None:
    record = tmp_path / "chain.log"
    async with serving(chain_config(tmp_path, record)) as client:
        with anyio.fail_after(30):
            await until_ready(client, "chain")
            denied = stop_of(await execute(client, "chain", "make_draft", {"title": "t"}))
            unlisted = stop_of(await execute(client, "chain", "missing_next", {}))
            mistyped = stop_of(await execute(client, "chain", "bad_next", {}))
    assert denied == {
        "reason": "denied",
        "message": "Not called: delete_draft is denied by emceepee's config "
        "(tools.deny = ['delete_*'] ('delete_*' matches)).",
        "suggested": {"tool": "delete_draft", "arguments": {"draft_id": "draft-t"}},
    }
    assert unlisted == {
        "reason": "unknown_tool",
        "message": "Not called: 'chain' has no tool 'no_such_tool'.",
        "suggested": {"tool": "no_such_tool", "arguments": {}},
    }
    assert mistyped == {
        "reason": "invalid_arguments",
        "message": "Not called: the arguments for step_b do not match its input schema: "
        "args: 'via' is a required property; args.value: 42 is not of type 'string'",
        "suggested": {"tool": "step_b", "arguments": {"value": 42}},
        "how": "execute_tool(server='chain', tool='step_b', args={\"value\":42})",
    }
    assert called(record) == ["make_draft", "missing_next", "bad_next"]
