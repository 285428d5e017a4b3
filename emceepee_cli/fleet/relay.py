"""The front's relay: bytes between the host's stdio and its session in the fleet, both ways.

Two blocking loops, one per direction (no event loop and no parsing: the least a relay can cost in
CPython): the host's stdin → the socket, on a thread, and the socket → the host's stdout, on the
main thread. Lifecycle:

- the host's EOF on stdin shuts the socket's write side: the fleet ends this host's session as
  `serve` ends at EOF (its calls interrupted, its backends stopped), then closes the connection,
  and the front exits 0 once it has written all that came before. Should the fleet not close
  within `CLOSE_WAIT_S`, the front exits all the same;
- SIGTERM or SIGINT does what EOF does, as `serve` stops its backends on them;
- the fleet closing first (it stopped, or died) ends the front with exit code 1 and a line on
  stderr: the host sees its server end, as when `serve` crashes. (Starting a new fleet and
  replaying the host's handshake is still to come.)
- the host's stdout gone: nothing is left to answer; the connection is closed and the front exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading

CHUNK_BYTES = 256 * 1024
CLOSE_WAIT_S = 30.0  # the fleet's stop of a session is bounded well below this (server/app.py)


class Relay:
    """One host's stdio and its connection to the fleet."""

    def __init__(self, sock: socket.socket, stdin: int = 0, stdout: int = 1) -> None:
        self.sock = sock
        self.stdin, self.stdout = stdin, stdout
        self.host_done = threading.Event()  # stdin ended (or a signal said to stop)
        self._shut = threading.RLock()  # a signal may come while the main thread holds it

    def run(self) -> int:
        """Relay until the fleet closes the connection; the front's exit code."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        threading.Thread(target=self._host_to_fleet, name="host to fleet", daemon=True).start()
        self._fleet_to_host()
        if not self.host_done.is_set():
            sys.stderr.write("emceepee: the fleet closed this host's connection (it stopped, or died)\n")
            return 1
        return 0

    def _fleet_to_host(self) -> None:
        """Copy the fleet's bytes to stdout until it closes the connection, or stdout fails (the
        host is gone: that ends its session as its EOF would)."""
        while data := self._received():
            try:
                _write_all(self.stdout, data)
            except OSError:
                self._host_ended()
                self.sock.close()
                return

    def _received(self) -> bytes:
        try:
            return self.sock.recv(CHUNK_BYTES)
        except OSError:
            return b""

    def _host_to_fleet(self) -> None:
        while True:
            try:
                data = os.read(self.stdin, CHUNK_BYTES)
            except OSError:
                data = b""
            if not data:
                break
            try:
                self.sock.sendall(data)
            except OSError:  # the fleet is gone: the other loop sees it too
                return
        self._host_ended()

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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
