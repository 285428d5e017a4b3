"""In the fleet, what a host's backends get from where emceepee runs is the host's, not the fleet's:
a remote backend's proxy, a relative root, what an add_server approval says would run, and the
browser a sign-in opens. Real fronts (`emceepee serve` with EMCEEPEE_FLEET=1), a real fleet."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from emceepee_cli import processes
from tests.fleet.fronts import Front, fleet_config, front, script_server
from tests.proxy import recording_proxy
from tests.signin.parts import browser, opened, running
from tests.support import EXAMPLES, ROOT

HTTP_ECHO = str(ROOT / "tests" / "backends" / "http_echo.py")

pytestmark = pytest.mark.anyio
needs_proc = pytest.mark.skipif(not processes.HAVE_PROC, reason="reads processes through /proc")
NO_PROXIES = {
    name: "" for base in ("HTTP", "HTTPS", "ALL", "NO") for name in (f"{base}_PROXY", f"{base.lower()}_proxy")
}


async def call(host: Front, server: str, tool: str, **args: Any) -> dict[str, Any]:
    """A backend tool's result through execute_tool, error or not."""
    return await host.host.tool("execute_tool", {"server": server, "tool": tool, "args": args})


async def status_of(host: Front, server: str) -> dict[str, Any]:
    listed = await host.host.tool("list_servers", {})
    return next(row for row in listed["structuredContent"]["servers"] if row["name"] == server)


@needs_proc
async def test_a_remote_backend_goes_through_its_hosts_proxy_and_hosts_with_different_proxies_do_not_share(
    tmp_path: Path,
) -> None:
    echo = await anyio.open_process([sys.executable, HTTP_ECHO])
    async with echo:
        assert echo.stdout is not None
        port = int((await echo.stdout.receive()).decode().split()[0])
        url = f"http://127.0.0.1:{port}/mcp"
        config = fleet_config(tmp_path / "config.toml", "[servers.remote]", f"url = {json.dumps(url)}")
        with recording_proxy() as proxy, anyio.fail_after(90):
            proxied = {**NO_PROXIES, "HTTP_PROXY": proxy.url, "http_proxy": proxy.url}  # lowercase wins
            async with (
                front(config, tmp_path / "a.err", env=NO_PROXIES) as a,
                front(config, tmp_path / "b.err", env=proxied) as b,
            ):
                await a.reached()  # the fleet is a's: it has no proxy variable of its own anyway
                await a.call("echo", text="first")
                straight = await call(a, "remote", "whoami")
                through = await call(b, "remote", "whoami")
                again = await call(a, "remote", "whoami")
                statuses = [(await status_of(host, "remote"))["status"] for host in (a, b)]
            echo.terminate()
    assert not straight.get("isError") and straight["content"][0]["text"] == "none"
    assert not again.get("isError")  # b's failing instance is its own
    assert through.get("isError"), through
    assert proxy.seen and all(line.split()[1] == url for line in proxy.seen), proxy.seen
    assert statuses[0] == "ready" and statuses[1] != "ready"


@needs_proc
async def test_relative_roots_are_the_hosts_and_hosts_in_other_directories_do_not_share_them(
    tmp_path: Path,
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for place in (one, two):
        (place / "sub").mkdir(parents=True)
        (place / "own").mkdir()
    roots = EXAMPLES / "roots.py"
    config = fleet_config(
        tmp_path / "config.toml",
        "[defaults]",
        'roots = ["sub"]',
        *_table("own", roots, cwd=str(tmp_path), roots=["own"]),  # an absolute cwd: only roots differ
        *_table("other", roots, cwd=str(tmp_path)),
    )
    with anyio.fail_after(90):
        async with (
            front(config, tmp_path / "a.err", cwd=one) as a,
            front(config, tmp_path / "b.err", cwd=two) as b,
        ):
            seen = {
                (name, server): (await call(host, server, "list_roots"))["structuredContent"]["roots"]
                for name, host in (("a", a), ("b", b))
                for server in ("own", "other")
            }
            listed = await a.host.tool("list_servers", {})
    for name, place in (("a", one), ("b", two)):
        assert seen[name, "own"] == [{"uri": (place / "own").as_uri(), "name": "own"}]
        assert seen[name, "other"] == [{"uri": (place / "sub").as_uri(), "name": "sub"}]
    assert sorted(row["name"] for row in listed["structuredContent"]["servers"]) == ["h", "other", "own"]
    assert "not a directory" not in a.said + b.said  # the fleet checked them where each host is


@needs_proc
async def test_an_add_server_approval_says_what_would_run_where_the_host_is(tmp_path: Path) -> None:
    here, tools = tmp_path / "project", tmp_path / "host-bin"
    here.mkdir()
    tools.mkdir()
    program = tools / "only-on-the-hosts-path"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    local = here / "server.sh"
    local.write_text("#!/bin/sh\nexit 0\n")
    local.chmod(0o755)
    config = fleet_config(tmp_path / "config.toml")
    host_path = f"{tools}:/usr/bin:/bin"
    with anyio.fail_after(90):
        async with front(config, tmp_path / "first.err") as first:  # the fleet's PATH is this one's
            await first.reached()
            async with front(config, tmp_path / "a.err", env={"PATH": host_path}, cwd=here) as a:
                asked: dict[str, dict[str, Any]] = {}
                for command in (program.name, "./server.sh"):
                    added = await a.host.tool(
                        "add_server",
                        {
                            "name": "x" + str(len(asked)),
                            "command": command,
                            "persist": False,
                            "timeout_ms": 200,
                        },
                    )
                    request_id = added["structuredContent"]["approval"]["request_id"]
                    listed = await a.host.tool("get_elicitations", {})
                    asked[command] = next(
                        q
                        for q in listed["structuredContent"]["elicitations"]
                        if q["request_id"] == request_id
                    )
                    await a.host.tool(
                        "respond_to_elicitation", {"request_id": request_id, "action": "decline"}
                    )
    on_path, relative = asked[program.name], asked["./server.sh"]
    assert f"({program.name} is {program})" in on_path["message"] and f" in {here}" in on_path["message"]
    assert on_path["approval"]["arguments"]["executable"] == str(program)
    assert on_path["approval"]["arguments"]["cwd"] == str(here)
    exactly = f"{here}/./server.sh"  # what is run: from the host's cwd, as written
    assert f"(./server.sh is {exactly})" in relative["message"]
    assert relative["approval"]["arguments"]["executable"] == exactly


@needs_proc
async def test_a_sign_in_opens_the_browser_the_hosts_environment_names(tmp_path: Path) -> None:
    # The browser records what it opened in the host's FOLLOW_LOG, which the fleet's own
    # environment never holds (fleet/starter.py's `fleet_env`), whichever front started it.
    with running() as mock:
        config = fleet_config(
            tmp_path / "config.toml", "[servers.tracker]", f"url = {json.dumps(mock.base + '/mcp')}"
        )
        with anyio.fail_after(90):
            async with front(config, tmp_path / "a.err", env=browser(tmp_path)) as a:
                await a.reached()
                while (await status_of(a, "tracker"))["status"] != "ready":
                    await a.host.tool("await_activity", {"timeout_ms": 1000})
                whoami = await call(a, "tracker", "whoami")
    assert not whoami.get("isError") and len(opened(tmp_path)) == 1, (whoami, a.said)


def _table(name: str, script: Path, **extra: Any) -> list[str]:
    return script_server(name, script, *(f"{key} = {json.dumps(value)}" for key, value in extra.items()))
