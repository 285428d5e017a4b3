"""Where a failed call's error came from, through the real `emceepee serve`, on both lanes.

A backend's own JSON-RPC error (even -32000, the code the SDK also uses for a closed connection)
fails that one call; an answer over the line limit is emceepee's refusal, said as such; a resume
token for a task still running gives the task again; a call cut off by a config-driven restart
says so. Each test begins as a host does (list servers and tools, a normal call) before the fault,
and holds a second call in flight on a gate the test opens, to see what the fault did to it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.support import (
    Gate,
    home_env,
    hostile_table,
    next_event,
    payload,
    serve_command,
    still_answering,
    texts,
    until_ready,
    write_config,
)

pytestmark = pytest.mark.anyio

LANES = [pytest.param(True, id="fast"), pytest.param(False, id="slow")]


def serving_lane(config: Path, fast: bool) -> Client:
    """A host's client for `emceepee serve` with the fast lane on or off (EMCEEPEE_FAST_LANE)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_command(config)[1:],
        env={**home_env(), "EMCEEPEE_FAST_LANE": "1" if fast else "0"},
    )
    return Client(params, mode="legacy")


async def execute(client: Client, tool: str, server: str = "h", **extra: Any) -> Any:
    return await client.call_tool("execute_tool", {"server": server, "tool": tool, **extra})


async def begin(client: Client, fast: bool) -> dict[str, Any]:
    """As a host begins: servers, tools, a normal call (on the lane asked for); the backend's row."""
    await until_ready(client, "h")
    received = texts(await execute(client, "request_id", args={}))[0]
    assert received.startswith('"ee-fast-') == fast, received
    assert texts(await execute(client, "echo", args={"text": "hello"})) == ["hello"]
    return await server_row(client)


async def server_row(client: Client, name: str = "h") -> dict[str, Any]:
    rows = payload(await client.call_tool("list_servers", {}))["servers"]
    return next(row for row in rows if row["name"] == name)


class Gated(Gate):
    """A call of the test's client held in flight on a gate (tests/support.Gate), and its result."""

    def __init__(self, client: Client, gate: Path) -> None:
        super().__init__(gate)
        self.client = client
        self.result: Any = None

    async def run(self) -> None:
        self.result = await execute(self.client, "gated", args=self.args())


@pytest.mark.parametrize("fast", LANES)
async def test_a_backend_answering_minus_32000_fails_that_call_only(tmp_path: Path, fast: bool) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("h"))
    held = tmp_path / "gate"
    async with serving_lane(config, fast) as client:
        with anyio.fail_after(60):
            before = await begin(client, fast)
            gated = Gated(client, held)
            async with anyio.create_task_group() as tg:
                tg.start_soon(gated.run)
                await gated.held()
                failed = await execute(
                    client, "rpc_error", args={"code": -32000, "message": "quota exceeded"}
                )
                after_error = await execute(client, "echo", args={"text": "still here"})
                gated.open()
            after = await server_row(client)
            await still_answering(client)
    error = failed.structured_content["error"]
    assert failed.is_error
    assert error["message"] == "Backend 'h' answered tools/call 'rpc_error' with error -32000: quota exceeded"
    assert "exited" not in error["message"] and "restarted" not in error.get("hint", "")
    assert texts(after_error) == ["still here"]
    assert not gated.result.is_error and texts(gated.result) == ["opened"]
    assert after["status"] == "ready" and after["restarts"] == 0 and after["pid"] == before["pid"]


@pytest.mark.parametrize("fast", LANES)
async def test_a_resume_token_for_a_task_still_running_gives_the_task_again_then_its_result(
    tmp_path: Path, fast: bool
) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("h"))
    gate = tmp_path / "gate"
    args = {"file": str(gate), "text": "opened"}
    async with serving_lane(config, fast) as client:
        with anyio.fail_after(60):
            await begin(client, fast)
            promoted = await execute(client, "gated", args=args, timeout_ms=300)
            token = payload(promoted)["proxy_task"]["resume_token"]
            again = await execute(client, "gated", args=args, resume_token=token, timeout_ms=500)
            gate.touch()
            done = await execute(client, "gated", args=args, resume_token=token)
            await still_answering(client)
    first = payload(promoted)["proxy_task"]
    assert not again.is_error, texts(again)
    task = payload(again)["proxy_task"]
    assert task["task_id"] == first["task_id"] and task["status"] == "working"
    assert task["resume_token"] == token
    assert texts(done) == ["opened"]


@pytest.mark.parametrize("fast", LANES)
async def test_an_answer_over_the_line_limit_is_emceepees_refusal_and_the_backend_stays(
    tmp_path: Path, fast: bool
) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("h"))
    async with serving_lane(config, fast) as client:
        with anyio.fail_after(90):
            before = await begin(client, fast)
            gated = Gated(client, tmp_path / "gate")
            async with anyio.create_task_group() as tg:
                tg.start_soon(gated.run)
                await gated.held()
                refused = await execute(client, "oversize", args={"mb": 65})
                gated.open()
            after = await server_row(client)
            echoed = await execute(client, "echo", args={"text": "still here"})
    error = refused.structured_content["error"]
    assert refused.is_error
    assert error["message"] == (
        "emceepee refused backend 'h's answer to tools/call 'oversize': the answer was over 64 MiB, "
        "the most emceepee reads as one message. That call failed and the rest of the answer was "
        "skipped; the backend stays connected."
    )
    assert "backend's own error" not in error["hint"] and "answered" not in error["message"]
    assert texts(gated.result) == ["opened"] and texts(echoed) == ["still here"]
    assert after["restarts"] == 0 and after["pid"] == before["pid"]


@pytest.mark.parametrize("fast", LANES)
async def test_a_line_over_the_limit_without_a_readable_id_tells_the_calls_it_cuts_off_why(
    tmp_path: Path, fast: bool
) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("h"))
    async with serving_lane(config, fast) as client:
        with anyio.fail_after(90):
            before = await begin(client, fast)
            gated = Gated(client, tmp_path / "gate")
            async with anyio.create_task_group() as tg:
                tg.start_soon(gated.run)
                await gated.held()
                cut = await execute(client, "oversize_late_id", args={"mb": 65})
            after = await server_row(client)
            while after["status"] != "ready":  # the restart: each list_tools waits a little for it
                await client.call_tool("list_tools", {"server": "h"})
                after = await server_row(client)
            echoed = await execute(client, "echo", args={"text": "back"})
    for failed in (cut, gated.result):
        message = failed.structured_content["error"]["message"]
        assert failed.is_error and message.startswith("Backend 'h' lost its connection during tools/call"), (
            message
        )
        assert "emceepee closed the connection: the backend wrote a line over 64 MiB" in message
    assert after["restarts"] == 1 and after["pid"] != before["pid"]
    assert texts(echoed) == ["back"]


@pytest.mark.parametrize("fast", LANES)
async def test_a_call_cut_off_by_a_config_driven_restart_says_so(tmp_path: Path, fast: bool) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("h"))
    async with serving_lane(config, fast) as client:
        with anyio.fail_after(90):
            before = await begin(client, fast)
            gated = Gated(client, tmp_path / "gate")
            async with anyio.create_task_group() as tg:
                tg.start_soon(gated.run)
                await gated.held()
                write_config(config, hostile_table("h", env={"CHANGED": "1"}))
                reloaded = await next_event(client, "config_reloaded")
            await until_ready(client, "h")
            after = await server_row(client)
            echoed = await execute(client, "echo", args={"text": "after the restart"})
    assert reloaded["restarted"] == ["h"]
    error = gated.result.structured_content["error"]
    assert gated.result.is_error
    assert error["message"] == (
        "Backend 'h' was restarted because its table in the config file changed while "
        "tools/call 'gated' was running; the call was cut off."
    )
    assert error["hint"] == "Call the tool again once list_servers shows it ready."
    assert after["pid"] != before["pid"] and texts(echoed) == ["after the restart"]
