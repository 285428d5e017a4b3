"""The pipes to one stdio backend: spawn, bridge to an MCP session, stop.

Lifecycle: the command is resolved on the backend's PATH and spawned in its own process group
(so our shutdown can reach its children); three pumps run beside it — stdout lines to the
session, session messages to stdin, stderr lines to a log file and an in-memory tail. When the
context exits (or the process dies), shutdown runs shielded and bounded: close stdin, wait
`STDIN_CLOSE_GRACE_S`, SIGTERM the group, wait `TERM_GRACE_S`, SIGKILL. Nothing outlives it.

We spawn the process ourselves rather than through the SDK's `stdio_client` because the
supervisor needs what that hides: the pid, the exit code, and stderr as a stream it can keep.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import mcp_types as types
from mcp.shared.message import SessionMessage

from emceepee_cli.errors import BackendError
from emceepee_cli.redact import redact

log = logging.getLogger(__name__)

STDIN_CLOSE_GRACE_S = 2.0  # a well-behaved MCP server exits on stdin EOF well within this
TERM_GRACE_S = 2.0  # after SIGTERM, before SIGKILL
KILL_REAP_S = 2.0  # after SIGKILL; only an unkillable process runs this out
STDERR_TAIL_LINES = 200
MAX_LINE_BYTES = 64 * 1024 * 1024  # one JSON-RPC message; a longer "line" is a broken backend
LOG_ROTATE_BYTES = 1024 * 1024

ReadStream = anyio.abc.ObjectReceiveStream[SessionMessage | Exception]
WriteStream = anyio.abc.ObjectSendStream[SessionMessage]


@dataclass
class ProcessInfo:
    """What the supervisor may know about a running backend process."""

    pid: int
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_TAIL_LINES))
    returncode: int | None = None
    exited: anyio.Event = field(default_factory=anyio.Event)

    def describe_exit(self) -> str:
        if self.returncode is None:
            return "the process is still running"
        if self.returncode < 0:
            try:
                return f"killed by {signal.Signals(-self.returncode).name}"
            except ValueError:
                return f"killed by signal {-self.returncode}"
        return f"exit code {self.returncode}"


def resolve_command(command: str, env: Mapping[str, str]) -> str:
    """The executable's full path, looked up on the backend's own PATH."""
    found = shutil.which(command, path=env.get("PATH"))
    if found is None:
        raise BackendError(
            f"Command '{command}' was not found" + ("" if os.sep in command else " on PATH"),
            hint="Install it, or give its full path in the server's `command`.",
        )
    return found


def _open_log(path: Path | None) -> object | None:
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.exists() and path.stat().st_size > LOG_ROTATE_BYTES:
        path.replace(path.with_suffix(path.suffix + ".1"))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    return open(fd, "a", encoding="utf-8", errors="replace", buffering=1)


@asynccontextmanager
async def open_stdio(
    command: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    stderr_log: Path | None = None,
    on_stderr: Callable[[str], None] | None = None,
) -> AsyncIterator[tuple[ReadStream, WriteStream, ProcessInfo]]:
    """Spawn a backend and yield the session's streams plus its `ProcessInfo`.

    The read stream ends (and so the session fails its pending requests) the moment the
    backend's stdout closes; `info.exited` is set once the process has been reaped.
    """
    executable = resolve_command(command, env)
    if cwd is not None and not Path(cwd).is_dir():
        raise BackendError(f"Working directory '{cwd}' does not exist", hint="Fix the server's `cwd`.")
    process = await anyio.open_process(
        [executable, *args],
        env=dict(env),
        cwd=cwd,
        start_new_session=sys.platform != "win32",
        creationflags=getattr(subprocess, "CREATE_NO_WINDOW", 0),
    )
    info = ProcessInfo(pid=process.pid)
    log_file = _open_log(stderr_log)
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def pump_stdout() -> None:
        assert process.stdout is not None
        async with to_session:
            buffer = b""
            try:
                async for chunk in process.stdout:
                    *lines, buffer = (buffer + chunk).split(b"\n")
                    if len(buffer) > MAX_LINE_BYTES:
                        await to_session.send(ValueError("backend wrote an over-long line to stdout"))
                        buffer = b""
                    for line in lines:
                        if line.strip():
                            await to_session.send(_parse(line))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the session went away first; shutdown drains the rest

    async def pump_stdin() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await to_session.aclose()  # the backend stopped reading: end the session too

    async def pump_stderr() -> None:
        assert process.stderr is not None
        buffer = b""
        async for chunk in process.stderr:
            *lines, buffer = (buffer + chunk).split(b"\n")
            for raw in lines:
                _keep_stderr_line(raw, info, log_file, on_stderr)
        if buffer:
            _keep_stderr_line(buffer, info, log_file, on_stderr)

    async def reap() -> None:
        info.returncode = await process.wait()
        info.exited.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_stdout)
            tg.start_soon(pump_stdin)
            tg.start_soon(pump_stderr)
            tg.start_soon(reap)
            try:
                yield read_stream, write_stream, info
            finally:
                with anyio.CancelScope(shield=True):
                    await _stop(process, info)
                tg.cancel_scope.cancel()
    finally:
        for stream in (read_stream, write_stream):
            stream.close()
        if log_file is not None:
            log_file.close()  # type: ignore[attr-defined]


def _keep_stderr_line(
    raw: bytes, info: ProcessInfo, log_file: object | None, on_line: Callable[[str], None] | None
) -> None:
    line = redact(raw.decode("utf-8", errors="replace").rstrip("\r"))  # a backend may print its env
    info.stderr_tail.append(line)
    if log_file is not None:
        log_file.write(line + "\n")  # type: ignore[attr-defined]
    if on_line is not None:
        on_line(line)


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        snippet = line[:200].decode("utf-8", errors="replace")
        return ValueError(
            f"backend wrote a line to stdout that is not JSON-RPC: {snippet!r} ({exc.__class__.__name__})"
        )


async def _stop(process: anyio.abc.Process, info: ProcessInfo) -> None:
    """Close stdin, then escalate to SIGTERM and SIGKILL on the process group; every wait bounded."""
    if process.stdin is not None:
        try:
            await process.stdin.aclose()
        except OSError:
            pass
    for sig, grace in ((None, STDIN_CLOSE_GRACE_S), (signal.SIGTERM, TERM_GRACE_S), (_SIGKILL, KILL_REAP_S)):
        if sig is not None:
            _signal_group(process, sig)
        with anyio.move_on_after(grace):
            await info.exited.wait()
        if info.exited.is_set():
            # The leader is gone; its group may not be (a grandchild that ignored stdin EOF).
            _signal_group(process, _SIGKILL)
            return
    log.error("backend pid %s survived SIGKILL", process.pid)


_SIGKILL = getattr(signal, "SIGKILL", signal.SIGTERM)


def _signal_group(process: anyio.abc.Process, sig: signal.Signals) -> None:
    try:
        if sys.platform == "win32":
            process.kill() if sig == _SIGKILL else process.terminate()
        else:
            os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass
