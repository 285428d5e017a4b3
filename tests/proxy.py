"""An HTTP proxy for tests that forwards nothing: it records the request line of each request it
is sent (a proxied one names the whole URL) and answers 502, so a test sees which requests went
through it and that they failed there."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

READ_S = 5.0  # how long it waits for a request's head before it gives up on the connection
REFUSAL = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass
class Recording:
    """The proxy's address and the request lines it was sent, in order."""

    url: str
    seen: list[str] = field(default_factory=list)


@contextmanager
def recording_proxy() -> Iterator[Recording]:
    """A proxy on 127.0.0.1, until the block ends."""
    listener = socket.create_server(("127.0.0.1", 0))
    recording = Recording(f"http://127.0.0.1:{listener.getsockname()[1]}")
    thread = threading.Thread(target=_serve, args=(listener, recording), daemon=True)
    thread.start()
    try:
        yield recording
    finally:
        listener.close()
        thread.join(timeout=READ_S)


def _serve(listener: socket.socket, recording: Recording) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:  # closed: the test is done
            return
        with conn:
            conn.settimeout(READ_S)
            head = b""
            try:
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    head += chunk
                if head:
                    recording.seen.append(head.split(b"\r\n", 1)[0].decode(errors="replace"))
                conn.sendall(REFUSAL)
            except OSError:
                continue
