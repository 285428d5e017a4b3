"""The front's relay: lines between the host's stdio and its session in the fleet, both ways, and
a new fleet when that one dies.

Two blocking loops, one per direction (no event loop: the least a relay can cost in CPython):
the host's stdin → the socket, on a thread, and the socket → the host's stdout, on the main
thread. Only whole lines go either way, so that a fleet dying in the middle of one never leaves
the host, or the next fleet, half a line: the host's lines are parsed (hosts send little) and
noted in the session's book (fleet/replay.py); the fleet's are cut at their newlines and only
their heads read. A fleet line longer than `HOLD_BYTES` goes on to the host as it comes; a host
line longer than `HOST_LINE_BYTES` (the fleet refuses such a line anyway) goes on unread.

Lifecycle:

- the host's EOF on stdin (once the host's requests in flight are answered, `EOF_ANSWERS_S` at
  most; a signal does not wait) shuts the socket's write side: the fleet ends this host's session as
  `serve` ends at EOF (its calls interrupted; its backends left to the pool), then closes it,
  and the front exits 0 once it has written all that came before. Should the fleet not close
  within `CLOSE_WAIT_S`, the front exits all the same;
- SIGTERM or SIGINT does what EOF does, as `serve` stops its backends on them;
- the fleet closing first (it stopped, or died) is survived: the front drops the fleet's line
  it had only part of (or ends one it was streaming), answers each host request in flight
  (fleet/replay.py), reaches a fleet again (started if need be, fleet/starter.py; its hello names
  the session it had), replays the host's handshake there and goes on. The host's lines wait
  meanwhile (its thread holds the next one; the pipe holds the rest). A fleet that dies
  `CRASH_DEATHS` times within `CRASH_WINDOW_S`, that cannot be reached again, or that does not
  take the handshake ends the front with exit code 1 and a line on stderr saying why: the host
  sees its server end, as when `serve` crashes;
- the host's stdout gone: nothing is left to answer; the connection is closed and the front exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from emceepee_cli.fleet.replay import ID_SCAN_BYTES, Book
from emceepee_cli.fleet.starter import Connection, fleet_log
from emceepee_cli.rendezvous import Refused

CHUNK_BYTES = 256 * 1024
CLOSE_WAIT_S = 30.0  # the fleet's stop of a session is bounded well below this (server/app.py)
HOLD_BYTES = 1024 * 1024  # a fleet line is held until whole up to this; a longer one streams
HOST_LINE_BYTES = 64 * 1024 * 1024  # the fleet's own bound on a host's line (server/stdio.py)
CRASH_DEATHS = 3  # this many deaths of the fleet within CRASH_WINDOW_S end the front
CRASH_WINDOW_S = 60.0
REPLAY_S = 30.0  # for the new fleet's answer to the replayed initialize
EOF_ANSWERS_S = 2.0  # at the host's EOF, the longest its requests in flight are waited for

Reconnect = Callable[[str], Connection]  # the previous session → a connection to a fleet


class Relay:
    """One host's stdio and its connection to the fleet."""

    def __init__(self, connection: Connection, reconnect: Reconnect, stdin: int = 0, stdout: int = 1) -> None:
        self.sock = connection.sock
        self.session = connection.welcome.session
        self.reconnect = reconnect
        self.stdin, self.stdout = stdin, stdout
        self.book = Book()
        self.down = FleetLines(self.book, stdout)
        self.host_done = threading.Event()  # stdin ended (or a signal said to stop)
        self._shut = threading.RLock()  # a signal may come while the main thread holds it
        # Guards which socket the host's lines go to, and holds them while a fleet is reached again.
        self._sending = threading.Condition(threading.RLock())
        self.recovering = False
        self.epoch = 0  # one more for each fleet reached again
        self._overlong_epoch = -1  # the epoch of the fleet that got the start of an overlong line
        self.deaths: deque[float] = deque()

    def __repr__(self) -> str:
        return f"<Relay session={self.session} epoch={self.epoch} recovering={self.recovering} {self.book!r}>"

    def run(self) -> int:
        """Relay until the host leaves (0), or the fleet cannot be had again (1); the exit code."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        threading.Thread(target=self._host_to_fleet, name="host to fleet", daemon=True).start()
        while True:
            self._fleet_to_host()
            if self.host_done.is_set():
                return 0
            code = self._recover()
            if code is not None:
                return code

    # ---- fleet → host ----------------------------------------------------------------------

    def _fleet_to_host(self) -> None:
        """Copy the fleet's lines to stdout until it closes the connection, or stdout fails (the
        host is gone: that ends its session as its EOF would)."""
        while data := self._received():
            try:
                self.down.take(data)
            except OSError:
                self._host_ended()
                self.sock.close()
                return

    def _received(self) -> bytes:
        try:
            return self.sock.recv(CHUNK_BYTES)
        except OSError:
            return b""

    # ---- host → fleet ----------------------------------------------------------------------

    def _host_to_fleet(self) -> None:
        lines = HostLines(HOST_LINE_BYTES)
        while True:
            try:
                data = os.read(self.stdin, CHUNK_BYTES)
            except OSError:
                data = b""
            if not data:
                break
            for piece, kind in lines.feed(data):
                self._forward(piece, kind)
        if lines.buffer:  # a last line without its newline
            self._forward(bytes(lines.buffer), WHOLE)
        # A host that wrote its requests and closed stdin at once (`serve < requests.jsonl`) still
        # reads the answers: those that come quickly are let through before the session ends.
        self.book.wait_answered(EOF_ANSWERS_S)
        self._host_ended()

    def _forward(self, piece: bytes, kind: str) -> None:
        """One host line (or part of an overlong one) to the fleet, once it is reachable. The part
        of an overlong line that a fleet did not get the start of is dropped."""
        with self._sending:
            while self.recovering:
                self._sending.wait()
            if kind == WHOLE:
                line = self.book.host_line(piece)
                if line is None:
                    return
            elif kind == FIRST:
                line, self._overlong_epoch = piece, self.epoch
            elif self._overlong_epoch != self.epoch:
                return
            else:
                line = piece
            with contextlib.suppress(OSError):  # the fleet is gone: the other loop sees it too
                self.sock.sendall(line)

    # ---- a new fleet -----------------------------------------------------------------------

    def _recover(self) -> int | None:
        """The fleet closed the connection before the host's EOF: answer what it left unanswered,
        reach a fleet again and replay the handshake there. None: relay on; else the exit code."""
        if self._crash_loop():
            _say(
                f"the fleet closed this host's connection {CRASH_DEATHS} times within "
                f"{CRASH_WINDOW_S:g} s (it stopped, or died): giving up; its log: {fleet_log()}"
            )
            return 1
        with contextlib.suppress(OSError):  # wakes the host's thread should it be sending
            self.sock.shutdown(socket.SHUT_RDWR)
        with self._sending:
            self.recovering = True
        self.sock.close()
        try:
            self.down.cut()
            for answer in self.book.fleet_died():
                _write_all(self.stdout, answer)
        except OSError:
            self._host_ended()
            return 0
        _say("the fleet closed this host's connection (it stopped, or died); reaching a new one")
        try:
            connection = self.reconnect(self.session)
        except (Refused, OSError) as exc:
            _say(f"cannot reach a fleet again: {exc}; giving up")
            return 1
        if self.host_done.is_set():
            connection.sock.close()
            return 0
        return self._replay(connection)

    def _crash_loop(self) -> bool:
        now = time.monotonic()
        self.deaths.append(now)
        while self.deaths and self.deaths[0] < now - CRASH_WINDOW_S:
            self.deaths.popleft()
        return len(self.deaths) >= CRASH_DEATHS

    def _replay(self, connection: Connection) -> int | None:
        """Take up the host's session on `connection`, then let the host's lines go to it again.
        A fleet that dies meanwhile leaves the lines held: the caller sees its EOF, and recovers."""
        with self._sending:
            self.sock, self.session = connection.sock, connection.welcome.session
            self.epoch += 1
        if self.host_done.is_set():  # a signal came meanwhile: this fleet ends the session at once
            with contextlib.suppress(OSError):
                self.sock.shutdown(socket.SHUT_WR)
        replay = self.book.replay()
        try:
            if replay.opening is not None:
                self.sock.sendall(replay.opening)
                if not self._await_replayed():
                    return None
                problem = self.book.replayed.problem(self.book.protocol) if self.book.replayed else None
                if problem is not None:
                    _say(f"{problem}; giving up")
                    return 1
            with self._sending:
                for line in replay.then:
                    self.sock.sendall(line)
                self.recovering = False
                self._sending.notify_all()
        except TimeoutError:
            _say(f"the new fleet did not answer this host's initialize within {REPLAY_S:g} s; giving up")
            return 1
        except OSError:  # it closed the connection: the caller sees it
            return None
        _say(
            f"serving through a new fleet, pid {connection.welcome.pid} (session {self.session}); "
            "this host's handshake replayed"
        )
        return None

    def _await_replayed(self) -> bool:
        """Relay the new fleet's lines until its answer to the replayed initialize; False when it
        closes the connection first, or the host's stdout fails. `TimeoutError` past `REPLAY_S`."""
        deadline = time.monotonic() + REPLAY_S
        while self.book.replayed is None:
            self.sock.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                data = self.sock.recv(CHUNK_BYTES)
            except TimeoutError:  # an OSError, but not a closed connection
                raise
            except OSError:
                data = b""
            if not data:
                return False
            try:
                self.down.take(data)
            except OSError:  # the host is gone
                self._host_ended()
                return False
        self.sock.settimeout(None)
        return True

    # ---- the host's end --------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: object) -> None:
        self._host_ended()

    def _host_ended(self) -> None:
        """As the host's EOF: the fleet is told, and the front leaves at the latest `CLOSE_WAIT_S` later."""
        with self._shut:
            if self.host_done.is_set():
                return
            self.host_done.set()
        with contextlib.suppress(OSError):  # the fleet has gone already
            self.sock.shutdown(socket.SHUT_WR)
        timer = threading.Timer(CLOSE_WAIT_S, os._exit, (0,))
        timer.daemon = True
        timer.start()


WHOLE, FIRST, MORE = "whole", "first", "more"  # a host line; the start of an overlong one; its rest


class HostLines:
    """The host's bytes cut into lines (each with its newline); a line past `limit` comes in parts."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()
        self.overlong = False

    def feed(self, data: bytes) -> Iterator[tuple[bytes, str]]:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self.overlong:
                yield data[start : end + 1], MORE
                self.overlong = False
            elif self.buffer:
                self.buffer += data[start : end + 1]
                yield bytes(self.buffer), WHOLE
                self.buffer = bytearray()
            else:
                yield data[start : end + 1], WHOLE
            start = end + 1
        if start == len(data):
            return
        if self.overlong:
            yield data[start:], MORE
            return
        self.buffer += data[start:]
        if len(self.buffer) > self.limit:
            yield bytes(self.buffer), FIRST
            self.buffer = bytearray()
            self.overlong = True


class FleetLines:
    """The fleet's bytes to the host's stdout, whole lines only, each noted in the book first; a
    line longer than `HOLD_BYTES` goes on as it comes (its head kept, to note it once whole)."""

    def __init__(self, book: Book, stdout: int) -> None:
        self.book = book
        self.stdout = stdout
        self.held = bytearray()  # the start of a line not yet whole
        self.streaming = False  # a line past HOLD_BYTES is on its way to the host
        self.head = b""  # that line's first bytes

    def take(self, chunk: bytes) -> None:
        """Pass on what `chunk` ends and holds what it starts. `OSError` when stdout fails."""
        last = chunk.rfind(b"\n")
        if last < 0:
            self._partial(chunk)
            return
        start, data = 0, chunk
        if self.streaming:
            start = chunk.find(b"\n") + 1
            _write_all(self.stdout, memoryview(chunk)[:start])
            self.streaming = False
            self.book.fleet_line(self.head, 0, len(self.head), whole=False)
        elif self.held:
            data = b"".join((self.held, chunk))
            last += len(self.held)
            self.held = bytearray()
        self._lines(data, start, last + 1)
        if last + 1 < len(data):
            self._partial(data[last + 1 :])

    def _lines(self, data: bytes, start: int, stop: int) -> None:
        """Note the whole lines in `data[start:stop]` and write those the host gets, in one write
        when it gets them all."""
        kept = start  # the first byte not yet written
        at = start
        while at < stop:
            end = data.index(b"\n", at, stop)
            if not self.book.fleet_line(data, at, end):
                if kept < at:
                    _write_all(self.stdout, memoryview(data)[kept:at])
                kept = end + 1
            at = end + 1
        if kept < stop:
            _write_all(self.stdout, memoryview(data)[kept:stop])

    def _partial(self, data: bytes) -> None:
        if self.streaming:
            _write_all(self.stdout, data)
            return
        self.held += data
        if len(self.held) > HOLD_BYTES:
            self.head = bytes(self.held[:ID_SCAN_BYTES])
            _write_all(self.stdout, self.held)
            self.held = bytearray()
            self.streaming = True

    def cut(self) -> None:
        """The fleet died: drop the line held, or end the one streaming (the host reads a line it
        cannot parse, but the next one whole). `OSError` when stdout fails."""
        self.held = bytearray()
        if self.streaming:
            self.streaming = False
            _write_all(self.stdout, b"\n")


def _say(line: str) -> None:
    sys.stderr.write(f"emceepee: {line}\n")
    sys.stderr.flush()


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
