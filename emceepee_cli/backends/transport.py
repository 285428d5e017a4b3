"""The pipes to one stdio backend: spawn, bridge to an MCP session, stop.

Lifecycle: the backend's stderr log is opened first (a failure there is reported and costs only
the file, and no process is spawned yet to be stranded); the command is resolved on the
backend's PATH and spawned in its own process group, on Linux with a parent-death signal so it
hears of emceepee's death however emceepee dies. Four tasks run beside it: stdout lines to the
session, session messages to stdin, stderr lines to the log and an in-memory tail, and one that
reaps the exit. When the context exits (or the process dies) the process is stopped, shielded
and bounded (`process.stop`); nothing outlives it.

Every line is bounded. A stderr line is cut at `STDERR_LINE_BYTES`. A stdout message over
`MAX_LINE_BYTES` is skipped without being kept; its id is read from its first bytes, so the
request it answers fails at once with emceepee's refusal (`TooLong`, never taken for the backend's
own error) and the connection lives on (when no id can be read, the connection is closed instead,
so that no caller waits for an answer that never comes, and `ProcessInfo.dropped` says why).

We spawn the process ourselves rather than through the SDK's `stdio_client` because the
supervisor needs what that hides: the pid, the exit code, and stderr as a stream it can keep;
and through asyncio rather than `anyio.open_process`, which cannot arm the parent-death signal.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import mcp_types as types
import pydantic
from mcp.shared.message import SessionMessage

from emceepee_cli import child_exits, processes
from emceepee_cli.backends.failures import Refused, TooLong, Unreadable
from emceepee_cli.backends.lines import Lines, Piece, top_level
from emceepee_cli.backends.logfile import LogFile, LogPlace
from emceepee_cli.backends.process import STOP_BOUND_S, ExitProtocol, ProcessInfo, stop, watch_exit
from emceepee_cli.backends.raw_pipe import Exchanges
from emceepee_cli.errors import BackendError
from emceepee_cli.jsonrpc import valid_id
from emceepee_cli.redact import redact

log = logging.getLogger(__name__)

__all__ = ["MAX_LINE_BYTES", "STOP_BOUND_S", "ProcessInfo", "open_stdio", "resolve_command"]

STDERR_DRAIN_S = 0.5  # after the exit, for the last stderr lines (a stray may hold the pipe open)
STDERR_LINE_BYTES = 4096  # stderr is kept for people to read; a longer line is cut
MAX_LINE_BYTES = 64 * 1024 * 1024  # one JSON-RPC message from a backend
OVERSIZE_HEAD_BYTES = 64 * 1024  # what is kept of an over-long message, to find its id
READ_CHUNK = 64 * 1024

ReadStream = anyio.abc.ObjectReceiveStream[SessionMessage | Exception]
WriteStream = anyio.abc.ObjectSendStream[SessionMessage]


def resolve_command(command: str, env: Mapping[str, str]) -> str:
    """The executable's full path, looked up on the backend's own PATH."""
    searched = env.get("PATH")
    found = shutil.which(command, path=searched)
    if found is None:
        if os.sep in command:
            raise BackendError(
                f"Command '{command}' was not found", hint="Fix the path in the server's `command`."
            )
        elsewhere = shutil.which(command)  # emceepee's own PATH: "works in my shell, not in the host"
        hint = (
            f"It is at {elsewhere} on emceepee's own PATH: give that full path in the server's `command`."
            if elsewhere
            else "Install it, or give its full path in the server's `command`."
        )
        raise BackendError(
            f"Command '{command}' was not found on PATH (the backend's PATH: {searched or '(not set)'})",
            hint=hint,
        )
    return found


@asynccontextmanager
async def open_stdio(
    command: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    stderr_log: LogPlace | None = None,
    on_stderr: Callable[[str], None] | None = None,
    on_problem: Callable[[str], None] | None = None,
) -> AsyncIterator[tuple[ReadStream, WriteStream, ProcessInfo]]:
    """Spawn a backend and yield the session's streams plus its `ProcessInfo`.

    The read stream ends (and so the session fails its pending requests) the moment the
    backend's stdout closes; `info.exited` is set once the process has been reaped, and
    `info.settled` once it is stopped and its stderr read (its death report is then final).
    `on_problem` hears what goes wrong on our side of the pipes (log file, over-long messages).
    """
    executable = resolve_command(command, env)
    if cwd is not None and not await anyio.Path(cwd).is_dir():
        raise BackendError(f"Working directory '{cwd}' does not exist", hint="Fix the server's `cwd`.")
    report = on_problem or (lambda text: None)
    log_file = LogFile(stderr_log, report)
    try:
        process, protocol = await _spawn([executable, *args], env, cwd)
    except BaseException:
        log_file.close()
        raise
    info = ProcessInfo(pid=process.pid, start_time=processes.identify(process.pid).start)
    pipes = _Pipes(process, protocol, info, log_file, on_stderr or (lambda line: None), report)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pipes.pump_stdout)
            tg.start_soon(pipes.pump_stdin)
            tg.start_soon(pipes.pump_stderr)
            tg.start_soon(pipes.reap)
            try:
                yield pipes.read_stream, pipes.write_stream, info
            finally:
                with anyio.CancelScope(shield=True):
                    await stop(process, protocol, info)
                    with anyio.move_on_after(STDERR_DRAIN_S):
                        await pipes.stderr_done.wait()
                tg.cancel_scope.cancel()
    finally:
        pipes.close()
        log_file.close()
        if protocol.pipes is not None:
            protocol.pipes.close()  # our ends of the pipes; the process is gone by now
        info.settled.set()


async def _spawn(
    argv: list[str], env: Mapping[str, str], cwd: str | None
) -> tuple[asyncio.subprocess.Process, ExitProtocol]:
    extra: dict[str, Any] = {}
    if sys.platform == "win32":
        extra["creationflags"] = getattr(subprocess, "CREATE_NO_WINDOW", 0)
    else:
        extra["start_new_session"] = True  # its own group, so a stop reaches its children
        extra["preexec_fn"] = processes.parent_death_hook()
    loop = asyncio.get_running_loop()
    pipe = subprocess.PIPE
    with child_exits.spawning():  # its exit is asyncio's to collect: serve's reaper keeps off it
        transport, protocol = await loop.subprocess_exec(
            functools.partial(ExitProtocol, loop, READ_CHUNK),
            *argv,
            stdin=pipe,
            stdout=pipe,
            stderr=pipe,
            env=dict(env),
            cwd=cwd,
            **extra,
        )
        if not protocol.exit_seen.is_set():
            child_exits.waited_for(transport.get_pid())
    return asyncio.subprocess.Process(transport, protocol, loop), protocol


class _Pipes:
    """The three pumps between one process and its session, and the reaper."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        protocol: ExitProtocol,
        info: ProcessInfo,
        log_file: LogFile,
        on_stderr: Callable[[str], None],
        report: Callable[[str], None],
    ) -> None:
        self.process = process
        self.protocol = protocol
        self.info = info
        self.log_file = log_file
        self.on_stderr = on_stderr
        self.report = report
        self.to_session, self.read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        self.write_stream, self.from_session = anyio.create_memory_object_stream[SessionMessage](0)
        self.stdin_lock = anyio.Lock(fast_acquire=True)  # no trip round the loop when free
        self.stderr_done = anyio.Event()
        self.exchanges = info.exchanges = Exchanges(self.write_raw)  # the fast lane's raw calls

    def close(self) -> None:
        for stream in (self.read_stream, self.write_stream, self.to_session, self.from_session):
            stream.close()

    async def reap(self) -> None:
        await watch_exit(self.process, self.protocol, self.info)

    async def pump_stdout(self) -> None:
        assert self.process.stdout is not None
        lines = Lines(MAX_LINE_BYTES, head=OVERSIZE_HEAD_BYTES)
        try:
            async with self.to_session:
                while chunk := await self.process.stdout.read(READ_CHUNK):
                    for piece, data in lines.feed(chunk):
                        if piece is Piece.HEAD:
                            if not await self._oversized(data):
                                return  # an answer nobody can be told about: end the connection
                        elif data.strip() and not await self.exchanges.deliver(data):
                            await self._to_session(data)
                    data = b""  # the last line (a big result's, perhaps) is not kept while serve waits
                for _, data in lines.end():
                    if data.strip() and not await self.exchanges.deliver(data):
                        await self._to_session(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the session went away first; shutdown drains the rest
        finally:
            self.exchanges.close()
            self.info.closed.set()

    async def _to_session(self, line: bytes) -> None:
        """One line to the session; an answer the SDK's parser refuses (a lone surrogate, nesting
        past its limit) fails its request with the reason, rather than leave it waiting for ever."""
        parsed = _parse(line)
        if isinstance(parsed, Exception):
            fields = _fields(line)
            request_id, method = fields.get("id"), fields.get("method")
            if method is None and valid_id(request_id):
                why = _why(parsed)
                await self._refuse(request_id, Unreadable(why))
                self.report(f"the backend's answer to request {request_id!r} could not be read: {why}")
                return
        await self.to_session.send(parsed)

    async def _refuse(self, request_id: str | int, refusal: Refused) -> None:
        """The request fails with emceepee's refusal of its answer, on the lane that sent it; never
        taken for the backend's own error (backends/dispatcher.py raises `refusal` to the waiter)."""
        if not self.exchanges.refuse(request_id, refusal):  # a fast call's answer fails that call
            await self.to_session.send(_error(request_id, str(refusal), refusal))

    async def _oversized(self, head: bytes) -> bool:
        """A message over the limit, being skipped: answer what it belongs to. False: nothing can be."""
        fields = top_level(head)
        limit = f"{MAX_LINE_BYTES // (1024 * 1024)} MiB"
        request_id, method = fields.get("id"), fields.get("method")
        if method is None and valid_id(request_id):
            await self._refuse(request_id, TooLong(MAX_LINE_BYTES))
            self.report(
                f"the backend's answer was over {limit}, the most emceepee reads as one message: "
                f"request {request_id!r} failed; the rest of the answer was skipped"
            )
            return True
        if isinstance(method, str):
            if valid_id(request_id):  # a request of theirs: refuse it, so they do not wait either
                await self.write(_error(request_id, f"the request was over {limit}"))
            self.report(f"the backend sent {method!r} over {limit}; it was skipped")
            return True
        self.info.dropped = (
            f"emceepee closed the connection: the backend wrote a line over {limit} (the most emceepee "
            "reads as one message) whose id could not be read from its start, so the call it answered "
            "could not be told apart"
        )
        self.report(f"{self.info.dropped}; no call waits for an answer that will never come")
        return False

    async def write(self, message: SessionMessage) -> None:
        data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
        await self.write_raw(data.encode())

    async def write_raw(self, data: bytes) -> None:
        """One whole line to the backend's stdin (a broken pipe raises OSError)."""
        assert self.process.stdin is not None
        async with self.stdin_lock:
            self.process.stdin.write(data)
            await self.process.stdin.drain()

    async def pump_stdin(self) -> None:
        try:
            async with self.from_session:
                async for message in self.from_session:
                    await self.write(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            await self.to_session.aclose()  # the backend stopped reading: end the session too

    async def pump_stderr(self) -> None:
        assert self.process.stderr is not None
        lines = Lines(STDERR_LINE_BYTES)
        try:
            while chunk := await self.process.stderr.read(READ_CHUNK):
                for piece, data in lines.feed(chunk):
                    self._keep(piece, data)
            for piece, data in lines.end():
                self._keep(piece, data)
        except OSError:
            pass
        finally:
            self.stderr_done.set()

    def _keep(self, piece: Piece, raw: bytes) -> None:
        line = redact(raw.decode("utf-8", errors="replace").rstrip("\r"))  # a backend may print its env
        if piece is Piece.HEAD:
            line += f" … [cut: line longer than {STDERR_LINE_BYTES} bytes]"
        self.info.stderr_tail.append(line)
        self.log_file.write(line)
        self.on_stderr(line)


def _error(request_id: str | int, message: str, cause: Exception | None = None) -> SessionMessage:
    """An error for a request; with `cause`, emceepee's own (raised as `cause` to the waiter)."""
    own = {} if cause is None else {"data": cause}  # never written anywhere: the dispatcher raises it
    error = types.ErrorData(code=types.INTERNAL_ERROR, message=message, **own)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        snippet = line[:200].decode("utf-8", errors="replace")
        problem = ValueError(
            f"backend wrote a line to stdout that is not JSON-RPC: {snippet!r} ({exc.__class__.__name__})"
        )
        problem.__cause__ = exc
        return problem


def _why(problem: Exception) -> str:
    """What the SDK's parser said about a line, in one line."""
    cause = problem.__cause__
    if isinstance(cause, pydantic.ValidationError) and cause.errors():
        return str(cause.errors()[0]["msg"])
    return str(cause or problem).splitlines()[0]


def _fields(line: bytes) -> dict[str, Any]:
    """The top-level members of a line the SDK's parser refused, as far as they can be read."""
    try:
        doc = json.loads(line)  # reads a lone surrogate, and nesting to Python's recursion limit
    except (ValueError, RecursionError):
        return top_level(line[:OVERSIZE_HEAD_BYTES])
    return doc if isinstance(doc, dict) else {}
