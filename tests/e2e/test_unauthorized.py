"""A remote backend whose server answers 401 or 403 (tests/backends/http_gate.py), over the real
`serve` and the CLI: it is reported as needing authorization, with what to set and never a header's
value, and it is failed rather than restarted (the gate counts what reaches it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.support import ROOT, RawHost, raw_serving, run_cli, write_config

pytestmark = pytest.mark.anyio

GATE = ROOT / "tests" / "backends" / "http_gate.py"
VAR = "REMOTE_TOKEN"
SECRET = "S3cr3t-" + os.urandom(6).hex()
LITERAL = "L1teral-" + os.urandom(6).hex()  # a header value written in the config as it is
# A hostile challenge quotes the credentials it was sent; emceepee must not say them again.
ECHOING = 'Bearer realm="x", error="invalid_token", scope="{authorization}"'


class Gated:
    """A running gate: its port, and what reached it."""

    def __init__(self, port: int) -> None:
        self.port = port

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def counts(self) -> dict[str, int]:
        counted: dict[str, int] = httpx2.get(self.url("counts"), timeout=10).json()
        return counted

    def handshakes(self) -> dict[str, int]:
        """The initialize requests by path; a backend without a header also looks for a way to sign
        in (metadata, registration) once per start, which `sign_in_looks` counts."""
        return {key: n for key, n in self.counts().items() if key.endswith(" initialize")}

    def sign_in_looks(self) -> int:
        return self.counts().get("/register POST", 0)


@contextmanager
def gate(*flags: str) -> Iterator[Gated]:
    process = subprocess.Popen([sys.executable, str(GATE), *flags], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield Gated(int(process.stdout.readline()))
    finally:
        process.terminate()
        process.wait(timeout=10)


def refusing_config(tmp_path: Path, gated: Gated) -> Path:
    """Three servers behind one refusing gate: a `${VAR}` token, a literal one, and none at all."""
    return write_config(
        tmp_path / "config.toml",
        f"[servers.remote]\nurl = {json.dumps(gated.url('remote'))}\n"
        f'headers = {{ Authorization = "Bearer ${{{VAR}}}" }}\n',
        f"[servers.literal]\nurl = {json.dumps(gated.url('literal'))}\n"
        f'headers = {{ Authorization = "Bearer {LITERAL}" }}\n',
        f"[servers.bare]\nurl = {json.dumps(gated.url('bare'))}\n",
    )


async def until_failed(host: RawHost, *names: str) -> dict[str, dict[str, Any]]:
    """list_servers until each of `names` is failed; between looks, await_activity waits for the
    next event (a server failing is one). The caller bounds the wait."""
    while True:
        rows = {row["name"]: row for row in (await host.tool("list_servers", {}))["servers"]}
        if all(rows[name]["status"] == "failed" for name in names):
            return rows
        await host.tool("await_activity", {"timeout_ms": 1000})


async def call(host: RawHost, server: str, text: str = "hi") -> dict[str, Any]:
    return await host.tool("execute_tool", {"server": server, "tool": "echo", "args": {"text": text}})


def serving_raw(config: Path, stderr_path: Path) -> AbstractAsyncContextManager[RawHost]:
    """A real `serve` with the secret in its environment, its stderr kept in `stderr_path`."""
    return raw_serving(config, {**os.environ, VAR: SECRET}, stderr_path)


def leaked(said: str, *places: Path) -> list[str]:
    """Where a header value sent shows: in `said`, or in a file under `places` (logs, the journal)."""
    files = {
        str(path): path.read_bytes()
        for place in places
        for path in [place, *place.rglob("*")]
        if path.is_file()
    }
    found = {"said": said.encode(), **files}
    return [where for where, data in found.items() if SECRET.encode() in data or LITERAL.encode() in data]


async def test_a_server_refusing_at_the_handshake_is_failed_with_what_to_set_and_not_restarted(
    tmp_path: Path, emceepee_home: Path
) -> None:
    replies: list[Any] = []
    with gate("--status", "401", "--challenge", ECHOING) as gated:
        config = refusing_config(tmp_path, gated)
        async with serving_raw(config, tmp_path / "serve.stderr") as host:
            with anyio.fail_after(60):
                replies.append(await host.tool("list_tools", {}))
                rows = await until_failed(host, "remote", "literal", "bare")
                replies.append(rows)
                calls = [await call(host, name) for name in ("remote", "literal", "bare")]
                calls += [await call(host, "remote", text) for text in ("again", "and again")]
                replies += calls
                replies.append(await host.tool("list_tools", {"server": "remote"}))
                replies.append(await host.tool("await_activity", {"timeout_ms": 0}))
                rows_after = await until_failed(host, "remote", "literal", "bare")
        counts, looks = gated.handshakes(), gated.sign_in_looks()

    for name in ("remote", "literal", "bare"):
        row = rows_after[name]
        assert row["status"] == "failed" and row["restarts"] == 0, row
        assert row["last_error"].startswith(
            f"Backend '{name}' requires authorization (HTTP 401 Unauthorized; Bearer realm=\"x\", "
            'error="invalid_token"): '
        ), row  # the challenge's scope quoted the token sent: it is left out
        assert "MCPError" not in row["last_error"] and "error response" not in row["last_error"]
    assert "sent the header(s) Authorization (values not shown)" in rows_after["remote"]["last_error"]
    assert "emceepee sent no credentials" in rows_after["bare"]["last_error"]
    # Each call is told, with what to set; not "Server returned an error response".
    for reply, name in zip(calls, ["remote", "literal", "bare", "remote", "remote"], strict=True):
        error = reply["error"]
        assert error["message"] == rows_after[name]["last_error"], reply
        assert "config changes" in error["hint"], reply
    bare_hint = calls[2]["error"]["hint"]
    assert 'headers = { Authorization = "Bearer ${BARE_TOKEN}" }' in bare_hint
    command = (
        f"emceepee servers add bare --url '{gated.url('bare')}' -H 'Authorization=Bearer ${{BARE_TOKEN}}'"
    )
    assert command + " --replace" in bare_hint
    assert "Check the token" in calls[0]["error"]["hint"]
    # One handshake each, however many calls came after: nothing restarts them.
    assert counts == {"/remote initialize": 1, "/literal initialize": 1, "/bare initialize": 1}, counts
    assert looks == 1  # `bare` looked once for a way to sign in, and there was none
    assert leaked(json.dumps(replies), tmp_path / "serve.stderr", emceepee_home) == []


async def test_a_server_refusing_a_later_call_fails_that_call_and_the_backend_stays_failed(
    tmp_path: Path, emceepee_home: Path
) -> None:
    insufficient = 'Bearer error="insufficient_scope", scope="files:write"'
    with gate(
        "--status", "403", "--deny-from", "tools/call", "--challenge", insufficient, "--json-body"
    ) as gated:
        config = write_config(
            tmp_path / "config.toml",
            f"[servers.remote]\nurl = {json.dumps(gated.url('mcp'))}\n"
            f'headers = {{ Authorization = "Bearer ${{{VAR}}}" }}\n',
        )
        async with serving_raw(config, tmp_path / "serve.stderr") as host:
            with anyio.fail_after(60):
                (listed,) = (await host.tool("list_tools", {"server": "remote"}))["servers"]
                first = await call(host, "remote")
                rows = await until_failed(host, "remote")
                later = [await call(host, "remote", text) for text in ("again", "and again")]
                servers = await host.tool("list_servers", {})
        counts = gated.counts()

    assert [tool["name"] for tool in listed["tools"]] == ["echo"]  # it was ready before the refusals
    said = (
        "Backend 'remote' requires authorization (HTTP 403 Forbidden; Bearer error=\"insufficient_scope\", "
        'scope="files:write"): emceepee sent the header(s) Authorization (values not shown) and the server '
        "did not accept them."
    )
    assert first["error"]["message"] == said and "not allowed this" in first["error"]["hint"]
    assert rows["remote"]["status"] == "failed" and rows["remote"]["last_error"] == said
    assert rows["remote"]["restarts"] == 0
    assert [reply["error"]["message"] for reply in later] == [said, said]
    assert counts["/mcp initialize"] == 1 and counts["/mcp tools/call"] == 1, counts
    assert leaked(json.dumps([first, rows, later, servers]), tmp_path / "serve.stderr", emceepee_home) == []


def test_the_cli_says_what_to_set_and_exits_3(tmp_path: Path) -> None:
    with gate("--status", "401", "--challenge", ECHOING) as gated:
        config = str(refusing_config(tmp_path, gated))
        env = {**os.environ, VAR: SECRET}
        listed = run_cli("tools", "remote", "--config", config, "--wait", "20", env=env)
        listed_json = run_cli("tools", "bare", "--config", config, "--wait", "20", "--json", env=env)
        called = run_cli("call", "literal", "echo", "text=hi", "--config", config, "--wait", "20", env=env)
        doctor = run_cli("doctor", "--config", config, "--wait", "20", env=env)
        counts, looks = gated.handshakes(), gated.sign_in_looks()

    assert listed.returncode == 3, listed
    assert (
        "Backend 'remote' requires authorization (HTTP 401 Unauthorized; Bearer realm=\"x\"" in listed.stdout
    )
    assert listed_json.returncode == 3, listed_json
    (group,) = json.loads(listed_json.stdout)["servers"]
    assert group["status"] == "failed" and "emceepee sent no credentials" in group["error"]
    assert called.returncode == 3, called
    assert "Backend 'literal' requires authorization (HTTP 401" in called.stderr
    assert "Check the token" in called.stderr  # the hint is what to set, not "see how it is started"
    assert doctor.returncode == 1, doctor
    assert "Backend 'bare' requires authorization (HTTP 401" in doctor.stdout
    assert "emceepee servers add bare --url" in doctor.stdout
    # One handshake per command that starts it (doctor cannot start `remote`: a host lacks its ${VAR}).
    assert counts == {"/remote initialize": 1, "/literal initialize": 2, "/bare initialize": 2}, counts
    assert looks == 2  # `bare` has no header: each start looked once for a sign-in the server lacks
    outputs = [listed, listed_json, called, doctor]
    assert leaked("".join(p.stdout + p.stderr for p in outputs)) == []


async def next_event(host: RawHost, kind: str) -> dict[str, Any]:
    """The data of the next event of this kind (the caller bounds the wait)."""
    while True:
        for event in (await host.tool("await_activity", {"timeout_ms": 5000}))["events"]:
            if event["type"] == kind:
                return dict(event["data"])


async def test_the_header_it_asks_for_once_set_in_the_config_lets_the_running_serve_in(
    tmp_path: Path, emceepee_home: Path
) -> None:
    with gate("--status", "401", "--challenge", 'Bearer realm="x"', "--accept", f"Bearer {SECRET}") as gated:
        table = f"[servers.remote]\nurl = {json.dumps(gated.url('mcp'))}\n"
        config = write_config(tmp_path / "config.toml", table)
        async with serving_raw(config, tmp_path / "serve.stderr") as host:
            with anyio.fail_after(60):
                await host.tool("list_tools", {})
                refused = await call(host, "remote")
                failed = await until_failed(host, "remote")
                # The header as the hint words it, its token in the variable serve already has.
                header = f'headers = {{ Authorization = "Bearer ${{{VAR}}}" }}'
                assert header in refused["error"]["hint"]
                write_config(config, table + header + "\n")
                reloaded = await next_event(host, "config_reloaded")
                called = await call(host, "remote", "in at last")
                rows = {row["name"]: row for row in (await host.tool("list_servers", {}))["servers"]}
        counts = gated.counts()

    assert failed["remote"]["status"] == "failed"
    assert reloaded["restarted"] == ["remote"]
    assert called["content"][0]["text"] == "in at last" and not called["is_error"], called
    assert rows["remote"]["status"] == "ready" and "last_error" not in rows["remote"]
    assert counts["/mcp initialize"] == 2, counts  # refused once, then let in: nothing in between
    assert leaked(json.dumps([refused, failed, called, rows]), tmp_path / "serve.stderr", emceepee_home) == []
