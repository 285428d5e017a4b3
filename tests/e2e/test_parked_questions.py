"""A parked question holds only its own call, over the real `emceepee serve`.

The host declares no elicitation or sampling, so every question a backend asks is parked. A call
whose own question is parked becomes a task at once; a call that asked nothing returns its
result inline, however many questions its backend has parked — in meta mode (`execute_tool`) and
in direct mode (`asking__get_sum`), on the fast lane and off it. The backend is
tests/backends/asking.py: `get_sum` beside `ask` (a form) and `sample` (an LLM request).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from tests.support import (
    ROOT,
    envelope,
    home_env,
    payload,
    run_cli,
    serve_command,
    texts,
    until_ready,
    write_config,
)

pytestmark = pytest.mark.anyio

ASKING = ROOT / "tests" / "backends" / "asking.py"
BOUND_S = 90.0  # the whole session, on a loaded machine
MODES = [
    pytest.param("meta", True, id="meta-fast"),
    pytest.param("meta", False, id="meta-slow"),
    pytest.param("direct", True, id="direct-fast"),
    pytest.param("direct", False, id="direct-slow"),
]


def config_for(tmp_path: Path, expose: str) -> Path:
    """One `asking` backend; a call not answered in 20 s becomes a task (well past a fast call)."""
    backend = (
        f"[servers.asking]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(ASKING))}]\n"
    )
    return write_config(
        tmp_path / "config.toml", f'[defaults]\nexpose = "{expose}"\ntimeout_ms = 20000\n', backend
    )


def host(config: Path, fast: bool) -> Client:
    """A host that cannot answer questions (no elicitation, no sampling), fast lane on or off."""
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_command(config)[1:],
        env={**home_env(), "EMCEEPEE_FAST_LANE": "1" if fast else "0"},
    )
    return Client(params, mode="legacy")


async def call(
    client: Client, mode: str, tool: str, args: dict[str, Any], **extra: Any
) -> types.CallToolResult:
    """`asking`'s tool, by the host's way of calling it: execute_tool, or its direct name."""
    if mode == "direct":
        return await client.call_tool(f"asking__{tool}", args)
    return await client.call_tool("execute_tool", {"server": "asking", "tool": tool, "args": args, **extra})


def inline(result: types.CallToolResult) -> str:
    """The text of a result the backend gave while the host waited (not a task)."""
    assert not result.is_error, result
    assert "proxy_task" not in (result.structured_content or {}), result
    (text,) = texts(result)
    return text


def became_task(result: types.CallToolResult) -> dict[str, Any]:
    """A call that became a task because its own question is parked: its reply."""
    out = payload(result)
    assert "proxy_task" in out, out
    return out


async def questions(client: Client) -> dict[str, dict[str, Any]]:
    """Every parked question, by the tag its backend put in its message."""
    asked = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
    sampled = payload(await client.call_tool("get_sampling_requests", {}))["sampling_requests"]
    by_tag = {q["message"].split()[1].rstrip("?"): q for q in asked}
    for q in sampled:
        text = q["params"]["messages"][0]["content"]["text"]
        by_tag[text.split()[1].rstrip("?")] = q
    return by_tag


@pytest.mark.parametrize(("mode", "fast"), MODES)
async def test_two_parked_questions_hold_only_their_own_calls(tmp_path: Path, mode: str, fast: bool) -> None:
    async with host(config_for(tmp_path, "both" if mode == "direct" else "meta"), fast) as client:
        with anyio.fail_after(BOUND_S):
            await until_ready(client, "asking")
            before = [inline(await call(client, mode, "get_sum", {"a": n, "b": 1})) for n in range(3)]
            asked = became_task(await call(client, mode, "ask", {"tag": "A"}))
            sampled = became_task(await call(client, mode, "sample", {"tag": "B"}))
            parked = await questions(client)
            during = await call(client, mode, "get_sum", {"a": 2, "b": 3})
            again = inline(await call(client, mode, "get_sum", {"a": 40, "b": 2}))
            request_a, request_b = parked["A"]["request_id"], parked["B"]["request_id"]
            answered = await anyio.to_thread.run_sync(
                lambda: run_cli("answer", request_a, "--content", '{"name": "Ann"}')
            )
            await client.call_tool("respond_to_sampling", {"request_id": request_b, "content": "sampled"})
            task_a, task_b = asked["proxy_task"]["task_id"], sampled["proxy_task"]["task_id"]
            result_a = await client.call_tool("get_task_result", {"task_id": task_a, "timeout_ms": 30_000})
            result_b = await client.call_tool("get_task_result", {"task_id": task_b, "timeout_ms": 30_000})
            after = inline(await call(client, mode, "get_sum", {"a": 1, "b": 1}))
    assert before == ["1", "2", "3"]
    assert inline(during) == "5" and again == "42" and after == "2"
    assert asked["saga"]["steps"] and sampled["saga"]["steps"]  # each shown its own question
    assert (parked["A"]["task_id"], parked["B"]["task_id"]) == (task_a, task_b)
    pending = envelope(during)["pending_client_action"]  # the parked questions ride along, untouched
    assert [q["request_id"] for q in pending["elicitations"]] == [request_a]
    assert [q["request_id"] for q in pending["sampling_requests"]] == [request_b]
    assert answered.returncode == 0, answered.stderr
    assert texts(result_a) == ["A: hello Ann"] and texts(result_b) == ["B: sampled"]


async def test_many_calls_while_questions_are_parked_promote_only_the_askers(tmp_path: Path) -> None:
    """Parked questions, then a burst of fast calls with new questions among them: every fast call
    returns inline, every question is tied to the call that asked it or to none (several calls
    were in flight when it came), and each asker becomes a task whose answer reaches it."""
    tags = [f"C{n}" for n in range(4)]
    sums: dict[int, str] = {}
    tasks: dict[str, str] = {}

    async def fast_call(n: int) -> None:
        sums[n] = inline(await call(client, "meta", "get_sum", {"a": n, "b": 1000}, timeout_ms=30_000))

    async def asking_call(tag: str) -> None:
        reply = became_task(await call(client, "meta", "ask", {"tag": tag}, timeout_ms=2_000))
        tasks[tag] = reply["proxy_task"]["task_id"]

    async with host(config_for(tmp_path, "meta"), fast=True) as client:
        with anyio.fail_after(BOUND_S):
            await until_ready(client, "asking")
            inline(await call(client, "meta", "get_sum", {"a": 1, "b": 2}))
            for tag in ("A", "B"):
                await asking_call(tag)
            async with anyio.create_task_group() as tg:
                for n in range(24):
                    tg.start_soon(fast_call, n)
                    if n % 6 == 0:
                        tg.start_soon(asking_call, tags[n // 6])
            parked = await questions(client)
            while sorted(parked) != sorted(
                ["A", "B", *tags]
            ):  # an asker promoted by its timeout may ask late
                await client.call_tool("await_activity", {"timeout_ms": 1000})
                parked = await questions(client)
            last = inline(await call(client, "meta", "get_sum", {"a": 3, "b": 4}))
            for tag in tags:
                answer = {
                    "request_id": parked[tag]["request_id"],
                    "action": "accept",
                    "content": {"name": tag},
                }
                await client.call_tool("respond_to_elicitation", answer)
            results = {
                tag: texts(
                    await client.call_tool("get_task_result", {"task_id": tasks[tag], "timeout_ms": 30_000})
                )
                for tag in tags
            }
    assert sums == {n: str(n + 1000) for n in range(24)} and last == "7"
    assert (parked["A"]["task_id"], parked["B"]["task_id"]) == (tasks["A"], tasks["B"])
    for tag, question in parked.items():
        assert question.get("task_id") in (tasks[tag], None), (tag, question)
        assert (question["correlation"] == "server") == ("task_id" not in question), question
    assert results == {tag: [f"{tag}: hello {tag}"] for tag in tags}
