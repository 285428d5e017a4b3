"""Slow calls become tasks; tasks end, are cancelled, expire; events reach the host once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.support import (
    Gate,
    emceepee,
    envelope,
    example_table,
    hostile_table,
    payload,
    texts,
    until_event,
    write_config,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "backend.log"


def make_config(
    tmp_path: Path, record: Path, defaults: str = "", servers: tuple[str, ...] = ("echo",)
) -> Path:
    """A config with the backends a test uses (each SDK backend costs a second of CPU to start; "h",
    hostile.py, a fraction of that: its gates hold a call until the test opens them)."""
    tables = {
        "echo": example_table("echo", "echo.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}),
        "crashy": example_table("crashy", "crashy.py"),
        "h": hostile_table("h"),
    }
    return write_config(tmp_path / "config.toml", defaults, *(tables[name] for name in servers))


@pytest.fixture
def config(tmp_path: Path, record: Path) -> Path:
    """The echo backend, which most tests here call."""
    return make_config(tmp_path, record)


async def gated(client: Client, gate: Gate, timeout_ms: int) -> dict[str, Any]:
    """h.gated held on `gate`: a call that ends when the test says, so it is promoted when the test says."""
    arguments = {"server": "h", "tool": "gated", "args": gate.args("done"), "timeout_ms": timeout_ms}
    return payload(await client.call_tool("execute_tool", arguments))


async def slow(client: Client, seconds: float, timeout_ms: int, server: str = "echo") -> dict[str, Any]:
    result = await client.call_tool(
        "execute_tool",
        {
            "server": server,
            "tool": "slow",
            "args": {"seconds": seconds, "steps": 1},
            "timeout_ms": timeout_ms,
        },
    )
    return payload(result)


async def test_a_slow_call_becomes_a_task_and_its_result_comes_later(tmp_path: Path, record: Path) -> None:
    config = make_config(tmp_path, record, servers=("h",))
    gate = Gate(tmp_path / "gate")
    async with emceepee(config) as client:
        with anyio.fail_after(30):
            promoted = await client.call_tool(
                "execute_tool", {"server": "h", "tool": "gated", "args": gate.args("done"), "timeout_ms": 200}
            )
            task = payload(promoted)["proxy_task"]
            gate.open()
            result = await client.call_tool("get_task_result", {"task_id": task["task_id"]})
            finished = payload(await client.call_tool("get_task", {"task_id": task["task_id"][:10]}))["task"]
    assert task["status"] == "working" and task["server"] == "h" and task["tool"] == "gated"
    assert "get_task_result" in texts(promoted)[0]
    assert payload(promoted)["pending_on_server"]["tasks"][0]["task_id"] == task["task_id"]
    assert texts(result) == ["done"] and not result.is_error
    assert finished["status"] == "completed"


async def test_a_fast_call_never_creates_a_task(config: Path) -> None:
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "quick"}}
            )
            quick = await client.call_tool(
                "execute_tool",
                {
                    "server": "echo",
                    "tool": "slow",
                    "args": {"seconds": 0.05, "steps": 1},
                    "timeout_ms": 10_000,
                },
            )
            tasks = payload(await client.call_tool("list_tasks", {"include_completed": True}))
    assert texts(quick) == ["slept 0.05 s"]
    assert tasks == {"tasks": []}


async def test_cancel_task_cancels_the_backend_call(config: Path, record: Path) -> None:
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            await client.call_tool("list_tools", {})  # the backend is up: the call reaches it
            task = (await slow(client, 30, 100))["proxy_task"]
            cancelled = payload(await client.call_tool("cancel_task", {"task_id": task["task_id"]}))
            # a later round trip to the same backend: it has handled the cancellation by then
            await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "after"}}
            )
            result = await client.call_tool("get_task_result", {"task_id": task["task_id"]})
            again = await client.call_tool("cancel_task", {"task_id": task["task_id"]})
    assert cancelled["task"]["status"] == "cancelled"
    assert record.read_text().splitlines() == ["started slow", "cancelled slow"]
    assert result.is_error and "cancelled" in texts(result)[0]
    assert again.is_error and "already cancelled" in texts(again)[0]


async def test_await_activity_wakes_when_a_task_completes_and_delivers_each_event_once(
    tmp_path: Path, record: Path
) -> None:
    config = make_config(tmp_path, record, servers=("h",))
    gate = Gate(tmp_path / "gate")
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            await client.call_tool("list_tools", {})  # backends ready
            await client.call_tool("list_servers", {})  # start-up events delivered here
            task = (await gated(client, gate, 50))["proxy_task"]
            gate.open()  # it completes after its promotion's reply: await_activity is what hears it
            activity = await until_event(client, "completed", task["task_id"])
            quiet = payload(await client.call_tool("await_activity", {"timeout_ms": 100}))
    assert {"type": "event", "event_type": "task_status", "server": "h"} in activity["triggers"]
    assert quiet["triggers"] == [{"type": "timeout"}] and quiet["events"] == []
    assert quiet["pending_server"] == [] and quiet["pending_client"] == {
        "elicitations": [],
        "sampling_requests": [],
    }


async def test_events_ride_on_any_response_exactly_once(tmp_path: Path, record: Path) -> None:
    config = make_config(tmp_path, record, servers=("echo", "crashy"))  # each one's connect event
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            listing = await client.call_tool("list_tools", {})  # waits for both backends to connect
            quiet = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "a"}}
            )
            changed = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "add_tool", "args": {"name": "z"}}
            )
            after = await client.call_tool("list_servers", {})
    connected = listing.structured_content["events_since_last_response"]
    assert {(e["type"], e["server"]) for e in connected} == {
        ("server_connected", "echo"),
        ("server_connected", "crashy"),
    }
    assert envelope(listing)["events_since_last_response"] == connected  # same JSON in the text block
    assert envelope(quiet) == {} and texts(quiet) == ["a"]
    [event] = envelope(changed)["events_since_last_response"]
    assert event["type"] == "notification" and event["data"]["method"] == "notifications/tools/list_changed"
    assert changed.structured_content is None  # a backend's result: the envelope is added as text only
    assert "events_since_last_response" not in after.structured_content


async def test_a_backend_dying_fails_its_task_with_the_reason(tmp_path: Path, record: Path) -> None:
    config = make_config(tmp_path, record, servers=("h",))
    gate = Gate(tmp_path / "gate")
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            promoted = await gated(client, gate, 50)  # held: never answered
            await client.call_tool("execute_tool", {"server": "h", "tool": "die", "args": {"code": 3}})
            result = await client.call_tool("get_task_result", {"task_id": promoted["proxy_task"]["task_id"]})
            listed = payload(await client.call_tool("list_tasks", {"status": "failed"}))["tasks"]
    assert result.is_error
    assert (
        "failed" in texts(result)[0]
        and "exit code 3" in texts(result)[0]
        and "hostile: dying on request" in texts(result)[0]
    )
    assert [t["task_id"] for t in listed] == [promoted["proxy_task"]["task_id"]]
    assert "exit code 3" in listed[0]["error"]


async def test_a_task_past_its_ttl_expires_and_its_call_is_cancelled(tmp_path: Path, record: Path) -> None:
    config = make_config(tmp_path, record, "[defaults]\ntask_ttl_ms = 400\n")
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            await client.call_tool("list_tools", {})  # the backend is up: the call reaches it
            task = (await slow(client, 30, 50))["proxy_task"]
            await until_event(client, "expired", task["task_id"])
            await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "after"}}
            )
            result = await client.call_tool("get_task_result", {"task_id": task["task_id"]})
    assert result.is_error and "expired" in texts(result)[0]
    assert "cancelled slow" in record.read_text()


async def test_get_task_result_of_a_working_task_waits_only_as_long_as_asked(config: Path) -> None:
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            task = (await slow(client, 30, 50))["proxy_task"]
            still = await client.call_tool("get_task_result", {"task_id": task["task_id"], "timeout_ms": 100})
            await client.call_tool("cancel_task", {"task_id": task["task_id"]})
    assert not still.is_error and payload(still)["task"]["status"] == "working"
    assert "still working" in texts(still)[0]


async def test_unknown_and_ambiguous_task_ids_are_clear_errors(config: Path) -> None:
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            first = (await slow(client, 30, 50))["proxy_task"]["task_id"]
            second = (await slow(client, 30, 50))["proxy_task"]["task_id"]
            unknown = await client.call_tool("get_task", {"task_id": "ZZZZ"})
            common = next(i for i in range(26) if first[i] != second[i])
            ambiguous = await client.call_tool("get_task", {"task_id": first[:common]})
            for task_id in (first, second):
                await client.call_tool("cancel_task", {"task_id": task_id})
    assert unknown.is_error and "No task has an id starting with 'ZZZZ'" in texts(unknown)[0]
    assert ambiguous.is_error and "matches 2 tasks" in texts(ambiguous)[0]


async def test_progress_reaches_the_host_while_it_waits_on_a_task(tmp_path: Path, record: Path) -> None:
    config = make_config(tmp_path, record, servers=("h",))
    gate = Gate(tmp_path / "gate")
    seen: list[float] = []
    heard_two = anyio.Event()
    results: list[types.CallToolResult] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        if len(seen) >= 2:
            heard_two.set()

    async def wait_on(task_id: str) -> None:
        results.append(
            await client.call_tool("get_task_result", {"task_id": task_id}, progress_callback=on_progress)
        )

    async with emceepee(config) as client:
        with anyio.fail_after(20):
            # h.ticking reports progress until the gate opens: whenever the host's wait begins, it hears some
            args = {"server": "h", "tool": "ticking", "args": {"file": str(gate.path)}, "timeout_ms": 0}
            promoted = payload(await client.call_tool("execute_tool", args))
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_on, promoted["proxy_task"]["task_id"])
                await heard_two.wait()
                gate.open()
    assert [texts(result) for result in results] == [["ticked"]]
    assert seen == sorted(seen) and len(seen) >= 2


async def test_every_blocking_wait_is_clamped_below_the_hosts_cutoff(tmp_path: Path, record: Path) -> None:
    config = make_config(tmp_path, record, "[defaults]\nmax_wait_ms = 300\n")
    async with emceepee(config) as client:
        with anyio.fail_after(10):  # each wait below asks for a minute; the clamp answers in 0.3 s
            task = (await slow(client, 30, 60_000))["proxy_task"]
            still = payload(
                await client.call_tool("get_task_result", {"task_id": task["task_id"], "timeout_ms": 60_000})
            )
            activity = payload(await client.call_tool("await_activity", {"timeout_ms": 60_000}))
            await client.call_tool("cancel_task", {"task_id": task["task_id"]})
    assert still["task"]["status"] == "working"
    assert activity["pending_server"] == [
        {
            "server": "echo",
            "working_tasks": [{"task_id": task["task_id"], "tool": "slow", "status": "working"}],
        }
    ]
