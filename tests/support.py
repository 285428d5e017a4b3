"""Shared test helpers: example backends, config files, and an in-memory emceepee."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, cast

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client, MCPError, StdioServerParameters

from emceepee_cli.config import load_config
from emceepee_cli.server.app import build_server
from emceepee_cli.store.records import PendingRow, TaskRow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "servers"
HOSTILE = ROOT / "tests" / "backends" / "hostile.py"
RPC_ERRORS = ROOT / "tests" / "backends" / "rpc_errors.py"

POLL_S = 0.02  # how often `until` looks at what another process does


def example_table(name: str, script: str, **extra: Any) -> str:
    """A [servers.NAME] table running one example backend with this Python."""
    lines = [
        f"[servers.{name}]",
        f"command = {json.dumps(sys.executable)}",
        f"args = [{json.dumps(str(EXAMPLES / script))}]",
    ]
    for key, value in extra.items():
        lines.append(f"{key} = {json.dumps(value) if not isinstance(value, dict) else _inline(value)}")
    return "\n".join(lines) + "\n"


def hostile_table(name: str, *flags: str, **extra: Any) -> str:
    """A [servers.NAME] table running the hostile backend (tests/backends/hostile.py) with `flags`."""
    lines = [
        f"[servers.{name}]",
        f"command = {json.dumps(sys.executable)}",
        f"args = {json.dumps([str(HOSTILE), *flags])}",
    ]
    for key, value in extra.items():
        lines.append(f"{key} = {json.dumps(value) if not isinstance(value, dict) else _inline(value)}")
    return "\n".join(lines) + "\n"


def rpc_errors_table(name: str, *flags: str) -> str:
    """A [servers.NAME] table running tests/backends/rpc_errors.py with `flags`."""
    args = json.dumps([str(RPC_ERRORS), *flags])
    return f"[servers.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n"


def _inline(table: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in table.items()) + " }"


def write_config(path: Path, *tables: str) -> Path:
    path.write_text("\n".join(tables))
    return path


@asynccontextmanager
async def emceepee(config_path: Path, log_dir: Path | None = None) -> AsyncIterator[Client]:
    """emceepee's real server, in memory, with real subprocess backends behind it."""
    server = build_server(load_config(config_path), log_dir)
    async with Client(server, mode="legacy") as client:
        yield client


ENVELOPE = ("events_since_last_response", "pending_client_action")


def payload(result: Any) -> dict[str, Any]:
    """Our own tools' JSON (without the envelope); asserts the text blocks and structuredContent agree."""
    structured = result.structured_content
    assert structured is not None, result
    blocks = [json.loads(t) for t in texts(result, with_envelope=True) if t.startswith("{")]
    own = {k: v for k, v in structured.items() if k not in ENVELOPE}
    assert own in blocks, (own, blocks)
    for key in ENVELOPE:
        if key in structured:
            assert {key: structured[key]} in blocks
    return own


def envelope(result: Any) -> dict[str, Any]:
    """The envelope blocks of any result (ours or a backend's), read from the text blocks."""
    found: dict[str, Any] = {}
    for t in texts(result, with_envelope=True):
        if t.startswith("{"):
            block = json.loads(t)
            if len(block) == 1 and next(iter(block)) in ENVELOPE:
                found.update(block)
    return found


def texts(result: Any, with_envelope: bool = False) -> list[str]:
    """The text blocks of a result; the envelope's blocks only when asked for."""
    out = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    return out if with_envelope else [t for t in out if not _is_envelope(t)]


def _is_envelope(text: str) -> bool:
    return any(text.startswith('{"' + key + '":') for key in ENVELOPE)


def text_of(block: object) -> str:
    """The text of a content block, resource contents or embedded resource that the test knows
    holds text (a block of another kind fails the test, naming it)."""
    if isinstance(block, types.EmbeddedResource):
        block = block.resource
    assert isinstance(block, types.TextContent | types.TextResourceContents), block
    return block.text


def status_of(row: TaskRow | PendingRow | None) -> str:
    """A journal row's status; the row must exist (a missing one fails the test)."""
    assert row is not None
    return row["status"]


def as_task_row(fields: Mapping[str, object]) -> TaskRow:
    """`fields` as a row for the journal's `tasks.insert`: a test names only the columns it is about (the
    others stay NULL) and may give a JSON column as a dict (sqlite-utils writes it as JSON)."""
    return cast(TaskRow, dict(fields))


def as_pending_row(fields: Mapping[str, object]) -> PendingRow:
    """`fields` as a row for the journal's `pending.insert`, as `as_task_row` makes a task's."""
    return cast(PendingRow, dict(fields))


def home_env() -> dict[str, str]:
    """The least environment a `serve` of this test needs: its emceepee home, and the fleet switch
    the test runs under (off unless the test says: tests/conftest.py)."""
    return {
        "EMCEEPEE_HOME": os.environ["EMCEEPEE_HOME"],
        "EMCEEPEE_FLEET": os.environ.get("EMCEEPEE_FLEET", "0"),
    }


def serve_command(config: Path) -> list[str]:
    return [sys.executable, "-m", "emceepee_cli", "serve", "--config", str(config)]


# Execs argv[1:] without CAP_DAC_OVERRIDE (1) and CAP_FOWNER (3) when run as root: file modes then
# bind it as they bind the file's owner. A user who is not root needs nothing dropped.
AS_OWNER = (
    "import ctypes, os, sys\n"
    "if os.geteuid() == 0:\n"
    "    libc = ctypes.CDLL(None, use_errno=True)\n"
    "    for cap in (1, 3):\n"
    "        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP\n"
    "            raise OSError(ctypes.get_errno(), 'prctl(PR_CAPBSET_DROP)')\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)
AS_OWNER_PREFIX = [sys.executable, "-c", AS_OWNER]  # put before a command: it runs bound by file modes


def serving(
    config: Path,
    mode: Literal["legacy", "auto"] = "legacy",
    env: Mapping[str, str] | None = None,
    **host: Any,
) -> Client:
    """A host's client for a real `emceepee serve` process, in this test's emceepee home; `host` are
    the client's callbacks (an `elicitation_callback` makes it declare elicitation, and so on).

    `mode="legacy"` speaks the handshake era (2025-11-25), where questions are forwarded as
    requests; `"auto"` is the SDK's default, which negotiates 2026-07-28 with `serve`: questions
    then come back as input rounds of the call, which the client answers through its callbacks."""
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_command(config)[1:],
        env={**home_env(), **(env or {})},
    )
    return Client(params, mode=mode, **host)


@asynccontextmanager
async def raw_serving(
    config: Path, env: Mapping[str, str], stderr: Path | None = None
) -> AsyncIterator[RawHost]:
    """A real `serve` spoken to on the wire (`RawHost`), with `env` (its stderr kept in `stderr`).
    It must exit once its stdin closes (bounded); if it does not, it is killed, never left behind."""
    with stderr.open("wb") if stderr is not None else contextlib.nullcontext() as err:
        process = await anyio.open_process(serve_command(config), env=dict(env), stderr=err)
    try:
        host = RawHost(process)
        await host.initialize()
        yield host
    finally:
        assert process.stdin is not None
        await process.stdin.aclose()
        try:
            with anyio.fail_after(30):
                await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
            await process.aclose()


def interruptible() -> None:
    """A child's `preexec_fn`: SIGINT as a terminal's Ctrl-C delivers it, even when this process
    ignores it (a shell's background job, as a CI runner may start the suite, ignores SIGINT and
    SIGQUIT, and a child inherits that), so a test's Ctrl-C reaches the command it runs."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`emceepee ARGS…` as a real process (it inherits this test's emceepee home)."""
    return subprocess.run(
        [sys.executable, "-m", "emceepee_cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a killed child nobody has reaped yet is gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): trust kill(0)
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


class Gate:
    """A call held in flight by hostile.py's `gated` (or `stepped`, `ticking`) tool until the test
    opens it: no sleep in the backend races the test's look at a call still running."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def args(self, text: str = "opened") -> dict[str, Any]:
        """`gated`'s arguments: held on this gate, answering `text` once it opens."""
        return {"file": str(self.path), "text": text}

    def open(self, step: int | None = None) -> None:
        """Let the call answer (`stepped`: go past step `step`)."""
        (self.path if step is None else self.path.with_name(f"{self.path.name}.{step}")).touch()

    async def held(self) -> None:
        """Until the backend holds the `gated` call (the caller bounds the wait)."""
        await until(self.path.with_name(self.path.name + ".held").exists)


async def until(condition: Callable[[], bool]) -> None:
    """Wait (the caller bounds it) for what another process makes true: a file it writes, a
    process it ends. Nothing in this process can wake us when it happens, so it is looked at."""
    while not condition():  # noqa: ASYNC110 - another process makes it true: no Event can tell us
        await anyio.sleep(POLL_S)


async def refusal(request: Awaitable[object]) -> types.ErrorData:
    """The JSON-RPC error the host gets for a request (the awaitable the client makes of it)."""
    try:
        await request
    except MCPError as exc:
        return exc.error
    raise AssertionError("the request was answered, not refused")


async def still_answering(client: Client) -> None:
    """serve is alive and its event loop is free: a ping comes back within a bound."""
    with anyio.fail_after(5):
        await client.send_ping()


async def next_event(client: Client, kind: str) -> dict[str, Any]:
    """The data of the next event of this kind (the caller bounds the wait)."""
    while True:
        activity = payload(await client.call_tool("await_activity", {"timeout_ms": 5000}))
        for event in activity["events"]:
            if event["type"] == kind:
                return dict(event["data"])


async def until_ready(client: Client, *servers: str) -> dict[str, list[dict[str, Any]]]:
    """As a host begins: list emceepee's tools, then each named server's (no names: every server
    list_servers shows), until it is ready (each listing waits a little for a backend still
    starting, so this needs no sleep). Returns each server's tools. Bounded by the caller's
    deadline; a backend that fails stops the wait."""
    await client.list_tools()
    if not servers:
        rows = payload(await client.call_tool("list_servers", {}))["servers"]
        servers = tuple(row["name"] for row in rows)
    tools: dict[str, list[dict[str, Any]]] = {}
    for server in servers:
        while server not in tools:
            (group,) = payload(await client.call_tool("list_tools", {"server": server}))["servers"]
            assert group["status"] != "failed", group
            if "tools" in group:
                tools[server] = group["tools"]
    return tools


def modern_meta(capabilities: dict[str, Any]) -> dict[str, Any]:
    """The `_meta` a 2026-07-28 host stamps on every request: its version, who it is, and what this
    request declares it can answer (wire form: `{"elicitation": {"form": {}}, "sampling": {}}`)."""
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test-host", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


class RawHost:
    """A host speaking JSON-RPC lines over the serve process's pipes, so the test owns its pid.
    With `meta` (`modern_meta`), every request carries it: a 2026-07-28 host, which needs no
    `initialize`."""

    def __init__(self, process: anyio.abc.Process, meta: dict[str, Any] | None = None) -> None:
        self.process = process
        self.meta = meta
        self.buffer = b""
        self.next_id = 0
        self.heard: list[dict[str, Any]] = []  # what serve sent that was no reply (notifications, requests)

    async def initialize(self) -> None:
        await self.send(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test-host", "version": "0"},
            },
        )
        await self.send("notifications/initialized", notify=True)

    async def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call a meta-tool; its structuredContent."""
        result = await self.send("tools/call", {"name": name, "arguments": arguments})
        return result.get("structuredContent") or {
            "content": result["content"],
            "is_error": result.get("isError", False),
        }

    async def send(self, method: str, params: dict[str, Any] | None = None, notify: bool = False) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if self.meta is not None and not notify:
            message["params"] = {**message["params"], "_meta": self.meta}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps(message) + "\n").encode())
        return None if notify else await self.reply(self.next_id)

    async def reply(self, request_id: int) -> Any:
        assert self.process.stdout is not None
        while True:
            while b"\n" not in self.buffer:
                self.buffer += await self.process.stdout.receive()
            line, self.buffer = self.buffer.split(b"\n", 1)
            message = json.loads(line)
            if message.get("id") == request_id:
                return message["result"]
            if "method" in message:
                self.heard.append(message)


async def until_event(client: Client, wanted: str, task_id: str) -> dict[str, Any]:
    """await_activity until the task's `wanted` status event arrives (the caller bounds the wait)."""
    while True:
        activity = payload(await client.call_tool("await_activity", {"timeout_ms": 5000}))
        for event in activity["events"]:
            if event["type"] == "task_status" and event["data"]["task_id"] == task_id:
                assert event["data"]["status"] == wanted, event
                return activity


DEADLINE_S = 30.0  # generous: a loaded machine starts the CLI and its backend slowly
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class Terminal:
    """The CLI on a pseudo-terminal: read what it shows, type answers; every read bounded by a deadline."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.master, slave = os.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "emceepee_cli", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            close_fds=True,
        )
        os.close(slave)
        self.raw = b""
        self.pos = 0

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode(errors="replace")).replace("\r\n", "\n")

    def _read(self, deadline: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # EIO: the process closed the terminal
            chunk = b""
        self.raw += chunk
        return bool(chunk)

    def expect(self, wanted: str) -> str:
        """Wait for `wanted` after what was already expected; return the text shown up to it."""
        deadline = time.monotonic() + DEADLINE_S
        while (found := self.text.find(wanted, self.pos)) < 0:
            if not self._read(deadline):
                raise AssertionError(f"{wanted!r} never shown; the terminal shows:\n{self.text[self.pos :]}")
        shown, self.pos = self.text[self.pos : found + len(wanted)], found + len(wanted)
        return shown

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def finish(self) -> int:
        deadline = time.monotonic() + DEADLINE_S
        while self._read(deadline):
            pass
        code = self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        os.close(self.master)
        return code


class LineHost:
    """A host on a real `emceepee serve`'s pipes that reads replies of any size in linear time
    (the SDK's stdio client re-joins its buffer per chunk, which a 60 MB reply makes quadratic),
    with several requests in flight at once. The test owns serve's pid (`process.pid`)."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.next_id = 0
        self.replies: dict[int, anyio.Event] = {}
        self.lines: dict[int, bytes] = {}

    async def initialize(self) -> None:
        await self.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test-host", "version": "0"},
            },
        )
        await self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send((json.dumps(message) + "\n").encode())

    async def request(self, method: str, params: dict[str, Any]) -> bytes:
        """The whole reply line to one request (read its JSON with json.loads when it is small)."""
        self.next_id += 1
        request_id = self.next_id
        done = self.replies[request_id] = anyio.Event()
        await self.write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        await done.wait()
        del self.replies[request_id]
        return self.lines.pop(request_id)

    async def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool call's result (a small one), parsed."""
        result: dict[str, Any] = json.loads(
            await self.request("tools/call", {"name": name, "arguments": arguments})
        )["result"]
        return result

    async def read(self) -> None:
        """Hand every reply to its request, until serve's stdout ends (run beside the requests)."""
        assert self.process.stdout is not None
        parts: list[bytes] = []
        async for chunk in self.process.stdout:
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                parts.append(chunk[start:end])
                line, parts = b"".join(parts), []
                self._deliver(line)
                start = end + 1
            parts.append(chunk[start:])

    def _deliver(self, line: bytes) -> None:
        request_id = _reply_id(line)
        if request_id in self.replies:
            self.lines[request_id] = line
            self.replies[request_id].set()


def _reply_id(line: bytes) -> Any:
    """A reply's id, read from its head when it has the SDK's compact shape (a big result is not
    parsed for it), else from the whole line."""
    cut = line.find(b',"result":', 0, 200)
    if cut > 0:
        try:
            return json.loads(line[:cut] + b"}").get("id")
        except ValueError:
            pass
    doc = json.loads(line)
    return doc.get("id") if isinstance(doc, dict) else None
