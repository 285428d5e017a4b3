"""The fleet: one process per user (per config and journal) serving every host's session.

Lifecycle (`run_fleet`): take the live lock (another fleet lives at this place: leave at once) →
bind the socket, 0600 in its 0700 folder (emceepee_cli/rendezvous.py), under the start lock unless
the front that started this fleet holds it → write `ready PID` to that front's pipe → serve:

- each connection from a peer of this user whose hello (fleet/hello.py) is of this version and
  names this fleet's files is one host's MCP session over `serve`'s own server (server/app.py's
  `build_server`), its backends started in that host's environment and working directory
  (backends/launch.py), until the host's EOF; then its calls are interrupted, as `serve` does at
  EOF, it leaves its backends (session/pool.py), and the connection is closed. A session that
  fails is logged and ends alone. A hello naming the session its front had in a fleet that died
  (`previous`) takes over that session's suspended calls and undelivered events;
- once no host has had a session for `[fleet] idle_exit` (`FIRST_HOST_S` at least before the
  first one) and no connection is open: take the start lock (held: a front is starting a fleet,
  so wait a little more), remove the socket, close what connected meanwhile (its front starts a
  new fleet), and exit, keeping the start lock until then so no front starts one meanwhile;
- on SIGTERM or SIGINT, or `emceepee fleet stop`: remove the socket, end every session (as `serve`
  ends on them: bounded), stop the backends, and exit (each front then starts a new fleet). SIGHUP
  changes nothing: each session follows the config file itself.

A connection whose first line is a control request instead of a hello (`emceepee fleet status`,
`fleet stop`, and `answer`'s poke) is answered and closed: fleet/control.py.

The backends are the fleet's (session/pool.py): a host's session attaches to the instance of each
of its servers that a session with the same process (session/sharing.py) started, or starts one,
warm for `[fleet] idle_exit` once no session uses it. They are journaled under the fleet's own
instance row, which lives as long as they do, and what they start stays below the fleet (a child
subreaper, as `serve` is): at the fleet's exit they are stopped and swept. Each session keeps its
own journal connection and instance row (its id is the session id), calls, questions, events,
watcher and config follower.
stdout and stderr are the fleet's log file, which the front opened (fleet/starter.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from emceepee_cli import __version__, processes, rendezvous
from emceepee_cli.backends.descendants import Descendants
from emceepee_cli.backends.launch import Launch
from emceepee_cli.clock import now_iso
from emceepee_cli.config.load import fleet_settings
from emceepee_cli.errors import EmceepeeError
from emceepee_cli.fleet import control
from emceepee_cli.fleet.control import ControlRequest, HostSeen
from emceepee_cli.fleet.hello import HELLO_MAX_BYTES, Hello, Welcome, refusal_line, welcome_line
from emceepee_cli.ids import new_id
from emceepee_cli.rendezvous import Place, Refused
from emceepee_cli.runtime import Runtime
from emceepee_cli.server import stdio_fds
from emceepee_cli.server.app import (
    SHUTDOWN_GRACE_S,
    SWEEP_BOUND_S,
    build_server,
    dispatch,
    load_or_report,
    log_to_stderr,
    logs_folder,
    prepare_process,
    serving_options,
)
from emceepee_cli.server.fastlane import FastLane
from emceepee_cli.server.stdio import host_streams
from emceepee_cli.session.backend_sink import ProcessBook
from emceepee_cli.session.pool import Pool
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.journal import Journal

log = logging.getLogger("emceepee.fleet")

HELLO_S = 10.0  # a front sends its hello as soon as it has connected
FIRST_HOST_S = 30.0  # a fleet nobody connects to leaves after this, whatever its idle_exit
IDLE_RETRY_S = 1.0  # the start lock was held at the idle deadline: a front is coming; look again
BACKLOG = 64


def run_fleet(config_path: Path, db_path: Path, ready_fd: int | None = None, verbose: bool = False) -> int:
    """Run the fleet for this config and journal until it leaves; the exit code."""
    log_to_stderr(verbose)
    where = rendezvous.place(config_path, db_path)
    try:
        rendezvous.prepare(where)
        live = rendezvous.hold_live(where)
        if live is None:
            log.info("another fleet (pid %s) serves %s; leaving", rendezvous.live_pid(where), where.sock)
            return 0
        listener = _listen(where, held=ready_fd is not None)
    except (Refused, OSError) as exc:
        log.error("the fleet cannot start: %s", exc)
        return 1
    fleet = Fleet(where, listener, config_path, db_path, fleet_settings(config_path).idle_exit_s)
    fleet.log_dir = logs_folder()
    prepare_process()
    processes.become_subreaper()  # what a backend starts and orphans stays below the fleet
    if ready_fd is not None:
        with contextlib.suppress(OSError):
            os.write(ready_fd, f"ready {os.getpid()}\n".encode())
        os.close(ready_fd)
    log.info("fleet %s (emceepee %s) listening on %s", os.getpid(), __version__, where.sock)
    anyio.run(fleet.serve)
    log.info("fleet %s stopped", os.getpid())
    logging.shutdown()
    return 0


def _listen(where: Place, held: bool) -> socket.socket:
    """The listening socket at `where` (a socket file found there is stale: the live lock is ours)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with (
            contextlib.nullcontext() if held else rendezvous.start_lock(where),
            rendezvous.address(where) as at,
        ):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(where.sock)
            sock.bind(at)
            os.chmod(where.sock, 0o600)  # the folder is 0700: nobody else could reach it meanwhile
            sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class Fleet:
    """The listening socket, the sessions it serves, and when to leave."""

    def __init__(
        self, where: Place, listener: socket.socket, config: Path, db: Path, idle_exit_s: float
    ) -> None:
        self.where = where
        self.listener = listener
        self.inode = os.stat(where.sock).st_ino  # the socket file is removed only while it is ours
        self.config, self.db = config, db
        self.idle_exit_s = idle_exit_s
        self.log_dir: Path | None = None
        self.connections = 0
        self._changed = anyio.Event()  # a connection came or went
        self._hosts_changed = anyio.Event()  # a host's session began or ended
        self._start_lock: int | None = None  # taken at the idle exit, kept until the process ends
        self.instance_id = new_id()  # the fleet's own row in the journal: its backends' processes
        self.pool: Pool | None = None  # the backends, shared by the sessions (session/pool.py)
        self._parts: _FleetParts | None = None
        self.started, self._started_at = now_iso(), time.monotonic()
        self.hosts: dict[str, HostSeen] = {}  # by session id
        self._stop_asked: anyio.Event | None = None  # `emceepee fleet stop`; made on the event loop

    def __repr__(self) -> str:
        return f"<Fleet {os.getpid()} connections={self.connections} {self.where.sock}>"

    async def serve(self) -> None:
        """Accept hosts until the idle exit, a signal or `emceepee fleet stop`; then stop the backends."""
        self._stop_asked = anyio.Event()
        journal = AsyncJournal(await anyio.to_thread.run_sync(Journal.for_serve, self.db))
        try:
            await journal.run(journal.sync.instances.register, self.instance_id)
        except EmceepeeError as exc:  # its backends run all the same; unjournaled, as serve's would
            log.error("journal: %s", exc)
        async with anyio.create_task_group() as backends:
            runtime = Runtime(backends)
            descendants = Descendants(journal, runtime, self.instance_id)
            book = ProcessBook(journal, runtime, self.instance_id, descendants)
            self.pool = Pool(runtime, book, self.log_dir, self.idle_exit_s)
            self._parts = _FleetParts(journal, descendants)
            runtime.spawn(descendants.run, name="descendants watcher")
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._signals, tg.cancel_scope)
                tg.start_soon(self._stop_when_asked, tg.cancel_scope)
                tg.start_soon(self._idle_exit, tg.cancel_scope)
                await self._accept(tg)
            self.listener.close()
            await self._leave()
            backends.cancel_scope.cancel()

    async def _leave(self) -> None:
        """Stop every backend, and what they left below the fleet; record that the fleet stopped.
        Bounded and shielded: called once every session has ended (or been given up on)."""
        parts, self._parts = self._parts, None
        if parts is None or self.pool is None:
            return
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(SHUTDOWN_GRACE_S):
                await self.pool.stop_all()
            parts.descendants.stop()
            with anyio.move_on_after(SWEEP_BOUND_S):
                await parts.descendants.sweep()
            await parts.journal.shutdown(self.instance_id)

    async def _accept(self, tg: anyio.abc.TaskGroup) -> None:
        while True:
            await anyio.wait_readable(self.listener)
            try:
                conn, _ = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:  # out of descriptors, say: the waiting host is taken next time
                log.error("cannot accept a host: %s", exc)
                await anyio.sleep(IDLE_RETRY_S)
                continue
            self._count(+1)
            tg.start_soon(self._connection, conn)

    def _count(self, step: int) -> None:
        self.connections += step
        self._changed.set()
        self._changed = anyio.Event()

    def _hosts_came_or_went(self) -> None:
        self._hosts_changed.set()
        self._hosts_changed = anyio.Event()

    async def _connection(self, conn: socket.socket) -> None:
        """One host: its hello, then its session; whatever fails ends this connection alone."""
        try:
            hello = await self._greeted(conn)
            if hello is not None:
                await self._session(conn, hello[0], hello[1])
        except Exception:
            log.exception("a host's connection failed")
        finally:
            conn.close()
            self._count(-1)

    async def _greeted(self, conn: socket.socket) -> tuple[Hello, str] | None:
        """The host's hello and its session id, welcomed; None when it was refused (and told why),
        or the connection was a control request, now answered."""
        try:
            rendezvous.check_peer(conn, "front")
        except Refused as exc:
            log.warning("refused a connection: %s", exc)
            return None
        conn.setblocking(False)
        try:
            with anyio.fail_after(HELLO_S):
                hello = control.opening(await _hello_line(conn))
        except (TimeoutError, ValueError) as exc:
            await _send(conn, refusal_line(f"not a hello: {exc}"))
            return None
        if isinstance(hello, ControlRequest):
            await self._control(conn, hello)
            return None
        why = self._refusal(hello)
        if why is not None:
            log.warning("refused front pid %s: %s", hello.front_pid, why)
            await _send(conn, refusal_line(why))
            return None
        session = new_id()
        await _send(conn, welcome_line(Welcome(session, os.getpid())))
        return hello, session

    def _refusal(self, hello: Hello) -> str | None:
        if hello.version != __version__:
            return f"this fleet runs emceepee {__version__}, the front {hello.version}"
        if (Path(hello.config).resolve(), Path(hello.db).resolve()) != (
            self.config.resolve(),
            self.db.resolve(),
        ):
            return f"this fleet serves {self.config} and {self.db}, not {hello.config} and {hello.db}"
        return None

    async def _session(self, conn: socket.socket, hello: Hello, session: str) -> None:
        """The host's MCP session over `serve`'s server, until its EOF (or the fleet stops)."""
        log.info("host session %s: front pid %s, in %s", session, hello.front_pid, hello.cwd)
        launch = Launch(hello.env, hello.cwd)
        config = await anyio.to_thread.run_sync(load_or_report, self.config, hello.env, hello.cwd)
        for problem in config.problems:
            log.warning("host session %s: config: %s", session, problem)
        lane = FastLane(dispatch)
        server = build_server(
            config,
            self.log_dir,
            db_path=self.db,
            follow_config=True,
            fast_lane=lane,
            launch=launch,
            pool=self.pool,
            instance_id=session,
            previous=hello.previous,
        )
        fd = conn.fileno()
        self.hosts[session] = HostSeen(session, hello.front_pid, hello.cwd, now_iso(), lane)
        self._hosts_came_or_went()
        try:
            async with host_streams(lane, fds=(fd, fd)) as (read, write):
                await server.run(read, write, serving_options(server))
        finally:
            del self.hosts[session]
            self._hosts_came_or_went()
            log.info("host session %s ended", session)

    async def _control(self, conn: socket.socket, request: ControlRequest) -> None:
        """Answer a control request (fleet/control.py); a `stop` is carried out once answered."""
        log.info("control request: %s", request.op)
        try:
            answer = control.answer_line(self, request)
        except Exception as exc:  # the command line hears that, not that no fleet runs
            log.exception("could not answer the control request %s", request.op)
            answer = refusal_line(f"the fleet failed to answer {request.op!r} ({exc!r}); see its log")
        await _send(conn, answer)
        if request.op == "stop" and request.version == __version__ and self._stop_asked is not None:
            self._stop_asked.set()

    def describe(self) -> dict[str, Any]:
        """What `emceepee fleet status` shows: this fleet, its hosts and its backends."""
        return {
            "pid": os.getpid(),
            "version": __version__,
            "started": self.started,
            "uptime_s": round(time.monotonic() - self._started_at, 1),
            "socket": str(self.where.sock),
            "config": str(self.config),
            "db": str(self.db),
            "rss_mb": control.rss_mb(),
            "idle_exit_s": self.idle_exit_s,
            "hosts": [host.described() for host in self.hosts.values()],
            "backends": self.backends_described(),
        }

    def backends_described(self) -> list[dict[str, Any]]:
        """The backends this fleet runs, each `{server, key, pid, status, hosts, shared, rss_mb}`
        (`key`: the server and a short digest of what makes it shared; `hosts`: the sessions
        using it; `shared`: a new session with that key would attach to it, session/pool.py)."""
        if self.pool is None:
            return []
        return [{**b, "rss_mb": control.rss_mb(b["pid"]) if b["pid"] else None} for b in self.pool.describe()]

    async def _idle_exit(self, scope: anyio.CancelScope) -> None:
        """Leave once no host has had a session for `idle_exit_s` (`FIRST_HOST_S` at first). A
        control request (`fleet status`, a poke) neither starts the countdown again nor ends it;
        a connection still open at the deadline (a front saying hello, a control request being
        answered, a session's last bytes) puts it off until it has closed or become a session."""
        grace = max(self.idle_exit_s, FIRST_HOST_S)
        while True:
            if self.hosts:
                await self._hosts_changed.wait()
                grace = self.idle_exit_s
                continue
            with anyio.move_on_after(grace) as waited:
                await self._hosts_changed.wait()
            while self.connections and not self.hosts:  # saying hello, or a session's last bytes
                with anyio.move_on_after(HELLO_S):
                    await self._changed.wait()
            if not waited.cancelled_caught or self.hosts:
                continue
            if self._leave_when_idle():
                scope.cancel()
                return
            grace = IDLE_RETRY_S

    def _leave_when_idle(self) -> bool:
        """Stop listening, under the start lock; False when a front holds it (it is coming). A lock
        that cannot be opened any more (the runtime folder went: a logout) is no reason to stay."""
        try:
            self._start_lock = rendezvous.take_start_lock(self.where)
        except (Refused, OSError) as exc:
            log.warning("the start lock cannot be taken (%s); leaving all the same", exc)
            self._unlisten()
            return True
        if self._start_lock is None:
            return False
        log.info("no host for %gs ([fleet] idle_exit): leaving", self.idle_exit_s)
        self._unlisten()
        return True

    def _unlisten(self) -> None:
        """Remove the socket (no front can connect any more), and close what connected meanwhile:
        its front sees the connection close before a welcome, and starts a new fleet."""
        with contextlib.suppress(OSError):
            if os.stat(self.where.sock).st_ino == self.inode:
                os.unlink(self.where.sock)
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            conn.close()

    async def _signals(self, scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGHUP:
                    log.info("received SIGHUP: each host's session follows the config file itself")
                    continue
                await self._stop(scope, f"received {signal.Signals(signum).name}")

    async def _stop_when_asked(self, scope: anyio.CancelScope) -> None:
        assert self._stop_asked is not None
        await self._stop_asked.wait()
        await self._stop(scope, "asked to stop (emceepee fleet stop)")

    async def _stop(self, scope: anyio.CancelScope, why: str) -> None:
        """Remove the socket, end every host's session (bounded), stop the backends and exit."""
        log.info("%s; ending every host's session", why)
        self._unlisten()
        scope.cancel()
        with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_GRACE_S):
            while self.connections:
                await self._changed.wait()
        await self._leave()
        logging.shutdown()
        os._exit(0)


@dataclass(frozen=True)
class _FleetParts:
    """What the fleet itself holds beside its pool: its journal, and what its backends start."""

    journal: AsyncJournal
    descendants: Descendants


async def _hello_line(conn: socket.socket) -> bytes:
    """The first line a front sends (the caller bounds the wait). Nothing may follow it before the
    fleet's answer: a front waits for that."""
    seen = bytearray()
    while b"\n" not in seen:
        if len(seen) > HELLO_MAX_BYTES:
            raise ValueError(f"longer than {HELLO_MAX_BYTES} bytes")
        await anyio.wait_readable(conn)
        try:
            chunk = conn.recv(64 * 1024)
        except BlockingIOError:
            continue
        if not chunk:
            raise ValueError("the connection ended before a whole line")
        seen += chunk
    line, _, rest = bytes(seen).partition(b"\n")
    if rest:
        raise ValueError("bytes followed it before the fleet's answer")
    return line


async def _send(conn: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError), anyio.move_on_after(HELLO_S):
        await stdio_fds.write_on_loop(conn.fileno(), data)
