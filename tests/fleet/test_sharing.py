"""Hosts share the fleet's backends exactly when the process would be the same, and each host hears
what is its own: real fronts (`emceepee serve` with EMCEEPEE_FLEET=1), a real fleet, real backends."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from emceepee_cli import processes
from tests.fleet.fronts import AskedHost, Front, fleet_config, front, script_server
from tests.support import alive, example_table, run_cli, until

pytestmark = pytest.mark.anyio
needs_proc = pytest.mark.skipif(not processes.HAVE_PROC, reason="reads processes through /proc")
ASKING = Path(__file__).parents[1] / "backends" / "asking.py"


async def pid_of(host: Front, server: str) -> int:
    """The pid of the host's instance of `server` (a hostile.py backend)."""
    result = await host.host.tool("execute_tool", {"server": server, "tool": "pid", "args": {}})
    assert not result.get("isError"), result
    return int(result["content"][0]["text"])


def hostile_server(name: str, *lines: str) -> list[str]:
    """A [servers.NAME] table of another hostile.py backend, for fleet_config's extra lines."""
    return script_server(name, Path(__file__).parents[1] / "backends" / "hostile.py", *lines)


@needs_proc
async def test_a_host_in_another_cwd_gets_its_own_cwd_dependent_instance_and_shares_the_rest(
    tmp_path: Path,
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    config = fleet_config(
        tmp_path / "config.toml", *hostile_server("fixed", f"cwd = {json.dumps(str(tmp_path))}")
    )
    with anyio.fail_after(90):
        async with (
            front(config, tmp_path / "a.err", cwd=one) as a,
            front(config, tmp_path / "b.err", cwd=one) as b,
            front(config, tmp_path / "c.err", cwd=two) as c,
        ):
            fleets = {(await host.reached())[0] for host in (a, b, c)}
            for host in (a, b, c):  # as a host begins: what is there
                listed = await host.host.tool("list_servers", {})
                assert sorted(s["name"] for s in listed["structuredContent"]["servers"]) == ["fixed", "h"]
            h = [await pid_of(host, "h") for host in (a, b, c)]
            fixed = [await pid_of(host, "fixed") for host in (a, b, c)]
            assert h[0] == h[1] != h[2]  # `h` takes the host's cwd: the third host's is its own
            assert fixed[0] == fixed[1] == fixed[2]  # `fixed` has a cwd of its own: one for all
            assert len(fleets) == 1
            assert await c.call("echo", text="still mine") == "still mine"
    assert not any(alive(pid) for pid in {*h, *fixed})


@needs_proc
async def test_a_per_host_server_and_a_server_taking_a_host_value_are_shared_only_where_the_same(
    tmp_path: Path,
) -> None:
    config = fleet_config(
        tmp_path / "config.toml",
        'env = { TOKEN = "${HOST_TOKEN}" }',
        *hostile_server("mine", "per_host = true"),
    )
    same, other = {"HOST_TOKEN": "t1", "UNRELATED": "x"}, {"HOST_TOKEN": "t1", "UNRELATED": "y"}
    with anyio.fail_after(90):
        async with (
            front(config, tmp_path / "a.err", env=same) as a,
            front(config, tmp_path / "b.err", env=other) as b,
            front(config, tmp_path / "c.err", env={"HOST_TOKEN": "t2"}) as c,
        ):
            h = [await pid_of(host, "h") for host in (a, b, c)]
            mine = [await pid_of(host, "mine") for host in (a, b, c)]
    assert h[0] == h[1] != h[2]  # a variable no backend is given does not matter; one it is given does
    assert len(set(mine)) == 3  # per_host = true: never shared


@needs_proc
async def test_an_instance_no_host_uses_stops_after_the_grace_while_the_shared_one_stays(
    tmp_path: Path,
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    config = fleet_config(tmp_path / "config.toml", idle_exit="1s")
    with anyio.fail_after(90):
        async with front(config, tmp_path / "a.err", cwd=one) as a:
            fleet, _ = await a.reached()
            kept = await pid_of(a, "h")
            async with front(config, tmp_path / "b.err", cwd=two) as b:
                gone = await pid_of(b, "h")
            async with front(config, tmp_path / "b2.err", cwd=two) as b:  # within the grace: warm
                assert await pid_of(b, "h") == gone
            await until(lambda: not alive(gone))  # nobody used it for idle_exit: stopped
            assert alive(kept) and alive(fleet)
            assert await pid_of(a, "h") == kept
        await until(lambda: not alive(fleet))
    assert not alive(kept)


@needs_proc
async def test_a_question_from_one_hosts_call_is_forwarded_to_that_host_only(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml", *script_server("ask", ASKING))
    caps: dict[str, Any] = {"elicitation": {"form": {}}}
    with anyio.fail_after(90):
        async with (
            front(config, tmp_path / "a.err", capabilities=caps) as a,
            front(config, tmp_path / "b.err", capabilities=caps) as b,
        ):
            fleet, _ = await a.reached()
            for host in (a, b):
                await host.host.tool("list_tools", {"server": "ask"})
                assert await _sum(host) == "5"
            assert len(_children(fleet, str(ASKING))) == 1  # one instance, both hosts'
            asked_a, asked_b = _asked(a), _asked(b)
            async with anyio.create_task_group() as tg:
                answers: dict[str, Any] = {}

                async def call(name: str, host: Front) -> None:
                    answers[name] = await host.host.tool(
                        "execute_tool", {"server": "ask", "tool": "ask", "args": {"tag": name}}
                    )

                tg.start_soon(call, "a", a)
                request = await asked_a.question()
                assert request["method"] == "elicitation/create" and "Question a?" in json.dumps(request)
                await asked_a.answer(request, {"action": "accept", "content": {"name": "ann"}})
            assert answers["a"]["content"][0]["text"] == "a: hello ann"
            assert await _sum(b) == "5"  # b's pipe has carried all it was sent by now
            assert asked_b.asked == []


@needs_proc
async def test_an_event_of_a_shared_backend_reaches_each_host_once(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    method = "notifications/resources/list_changed"
    with anyio.fail_after(90):
        async with front(config, tmp_path / "a.err") as a, front(config, tmp_path / "b.err") as b:
            assert await pid_of(a, "h") == await pid_of(b, "h")
            for host in (a, b):
                await host.host.tool("await_activity", {"timeout_ms": 0})  # what came so far
            flood = {"server": "h", "tool": "flood", "args": {"n": 1, "method": method}}
            first = [await a.host.tool("execute_tool", flood)]
            for host, replies in ((a, first), (b, [])):  # each reply carries the events not seen yet
                while not _notified(replies, method):
                    replies.append(await host.host.tool("await_activity", {"timeout_ms": 5000}))
                replies.append(await host.host.tool("await_activity", {"timeout_ms": 0}))
                assert len(_notified(replies, method)) == 1, replies


def _notified(replies: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    """The notification events with `method` the replies carried (await_activity's own list, or
    the events block a tool call's reply ends with)."""
    events = [
        event for reply in replies for event in (reply.get("structuredContent") or {}).get("events", [])
    ]
    for reply in replies:
        for block in reply["content"][1:]:
            if block["text"].startswith('{"events_since_last_response"'):
                events += json.loads(block["text"])["events_since_last_response"]
    return [e for e in events if e["type"] == "notification" and e["data"]["method"] == method]


def _asked(host: Front) -> AskedHost:
    assert isinstance(host.host, AskedHost)
    return host.host


async def _sum(host: Front) -> str:
    result = await host.host.tool(
        "execute_tool", {"server": "ask", "tool": "get_sum", "args": {"a": 2, "b": 3}}
    )
    return str(result["content"][0]["text"])


def _children(parent: int, script: str) -> list[int]:
    """The processes whose parent is `parent` and whose command line names `script`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            stat = processes.stat(int(proc.name))
        except OSError:
            continue
        if stat is not None and stat.ppid == parent and script in cmdline:
            found.append(int(proc.name))
    return found


@needs_proc
async def test_a_shared_backend_keeps_the_most_verbose_level_and_a_subscription_until_no_host_holds_it(
    tmp_path: Path,
) -> None:
    said = tmp_path / "surface.log"  # what the backend was told, line by line
    config = fleet_config(tmp_path / "config.toml")
    with config.open("a") as file:
        file.write(example_table("surface", "surface.py", env={"EMCEEPEE_EXAMPLE_LOG": str(said)}))
    uri = "surface://counter"
    with anyio.fail_after(90):
        async with front(config, tmp_path / "a.err") as a, front(config, tmp_path / "b.err") as b:
            for host in (a, b):
                await host.host.tool("list_tools", {"server": "surface"})
            await a.host.request("logging/setLevel", {"level": "debug"})
            await b.host.request("logging/setLevel", {"level": "error"})
            for host in (a, b):
                await host.host.request("resources/subscribe", {"uri": uri})
            await b.host.request("resources/unsubscribe", {"uri": uri})
            await _surface(b)  # b's requests have all reached the backend by now
            told_while_a_holds_it = said.read_text().splitlines()
            await a.host.request("resources/unsubscribe", {"uri": uri})
            await _surface(a)
            told = said.read_text().splitlines()
    levels = [line for line in told_while_a_holds_it if line.startswith("level ")]
    assert levels[-1] == "level debug"  # b's "error" did not silence what a asked to hear
    assert f"unsubscribed {uri}" not in told_while_a_holds_it
    assert told[-1] == f"unsubscribed {uri}"


async def _surface(host: Front) -> None:
    """A call to the surface backend, answered: what the host sent before it has been handled."""
    result = await host.host.tool(
        "execute_tool", {"server": "surface", "tool": "log", "args": {"level": "debug", "message": "x"}}
    )
    assert not result.get("isError"), result


@needs_proc
async def test_a_host_arriving_after_a_shared_backend_failed_gets_a_new_try(tmp_path: Path) -> None:
    script = tmp_path / "late.sh"  # not there yet: the backend fails to start
    hostile = Path(__file__).parents[1] / "backends" / "hostile.py"
    config = fleet_config(tmp_path / "config.toml", "[servers.late]", f"command = {json.dumps(str(script))}")
    with anyio.fail_after(90):
        async with front(config, tmp_path / "a.err") as a:
            while await _status(a, "late") != "failed":
                await a.host.tool("await_activity", {"timeout_ms": 2000})
            script.write_text(f"#!/bin/sh\nexec {sys.executable} {hostile}\n")  # the user fixes it
            script.chmod(0o755)
            async with front(config, tmp_path / "b.err") as b:
                assert (await pid_of(b, "late")) > 0  # a new instance, for the host that came after
            assert await _status(a, "late") == "failed"  # a's stays as it was, until a restart of its own


async def _status(host: Front, server: str) -> str:
    listed = await host.host.tool("list_servers", {})
    return str(next(s["status"] for s in listed["structuredContent"]["servers"] if s["name"] == server))


@needs_proc
async def test_a_question_calls_of_two_hosts_can_have_asked_is_parked_as_nobodys_and_answered_from_a_terminal(
    tmp_path: Path,
) -> None:
    config = fleet_config(tmp_path / "config.toml", *script_server("ask", ASKING))
    caps: dict[str, Any] = {"elicitation": {"form": {}}}
    with anyio.fail_after(90):
        async with (
            front(config, tmp_path / "a.err", capabilities=caps) as a,
            front(config, tmp_path / "b.err", capabilities=caps) as b,
        ):
            for host in (a, b):
                assert await _sum(host) == "5"
            tasks, gate = {}, tmp_path / "gate"
            for tag, host in (("a", a), ("b", b)):  # both in flight on the one shared instance
                args = {"tag": tag, "gate": str(gate)}
                asked = {"server": "ask", "tool": "ask", "args": args, "timeout_ms": 0}
                started = await host.host.tool("execute_tool", asked)
                tasks[tag] = started["structuredContent"]["proxy_task"]["task_id"]
            gate.touch()  # now both ask
            parked: list[dict[str, Any]] = []
            while len(parked) < 2:
                await a.host.tool("await_activity", {"timeout_ms": 2000})
                parked = json.loads((await _cli("pending", "--json")).stdout)["pending"]
            assert {q.get("task_id") for q in parked} == {None}, parked  # tied to neither host's call
            for question in parked:
                said = await _cli("answer", question["request_id"], "--content", '{"name": "pat"}')
                assert said.returncode == 0, said.stderr
            results = {}
            for tag, host in (("a", a), ("b", b)):
                done = await host.host.tool("get_task_result", {"task_id": tasks[tag], "timeout_ms": 20_000})
                results[tag] = done["content"][0]["text"]
            assert _asked(a).asked == [] and _asked(b).asked == []  # never forwarded to either host
    assert results == {"a": "a: hello pat", "b": "b: hello pat"}


async def _cli(*args: str) -> Any:
    return await anyio.to_thread.run_sync(lambda: run_cli(*args))


@needs_proc
async def test_a_backend_shared_by_hosts_granting_different_roots_sees_only_those_they_share(
    tmp_path: Path,
) -> None:
    asker = Path(__file__).parents[1] / "backends" / "roots_asker.py"
    config = fleet_config(tmp_path / "config.toml", *script_server("roots", asker))
    granted = {"a": ["file:///srv/shared", "file:///srv/only-a"], "b": ["file:///srv/shared"]}
    caps: dict[str, Any] = {"roots": {"listChanged": True}}
    where = {"server": "roots", "tool": "where", "args": {}}
    with anyio.fail_after(90):
        async with front(config, tmp_path / "a.err", capabilities=caps) as a, anyio.create_task_group() as tg:
            tg.start_soon(_grant_roots, _asked(a), granted["a"])
            alone = (await a.host.tool("execute_tool", where))["content"][0]["text"].splitlines()
            async with front(config, tmp_path / "b.err", capabilities=caps) as b:
                tg.start_soon(_grant_roots, _asked(b), granted["b"])
                await b.host.tool("list_servers", {})
                shared = (await a.host.tool("execute_tool", where))["content"][0]["text"].splitlines()
            tg.cancel_scope.cancel()
    assert alone == granted["a"]
    assert shared == ["file:///srv/shared"]  # never a root one of its hosts did not give


async def _grant_roots(host: AskedHost, roots: list[str]) -> None:
    """Answer every roots/list the fleet asks this host."""
    while True:
        request = await host.question()
        assert request["method"] == "roots/list", request
        await host.answer(request, {"roots": [{"uri": uri} for uri in roots]})
