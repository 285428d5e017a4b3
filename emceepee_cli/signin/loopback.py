"""The loopback listener one sign-in's authorization redirect lands on: `http://127.0.0.1:PORT/callback`.

It is bound when the authorization URL is shown (so a browser that answers at once finds it) and
closed when the sign-in ends. It takes only a `GET /callback` whose `state` is the one this sign-in
sent: anything else (another sign-in's redirect, a stray request, a hostile local process guessing)
gets an error page and changes nothing. Requests are bounded in size and time; the page says
what happened and never echoes what it was sent.
"""

from __future__ import annotations

import contextlib
import html
import secrets
import socket
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from mcp.shared.auth import AuthorizationCodeResult

from emceepee_cli.errors import BackendError

HOST = "127.0.0.1"
PATH = "/callback"
REQUEST_LIMIT = 16 * 1024  # bytes of a request's head: an authorization response is far smaller
REQUEST_TIMEOUT_S = 10.0


class SignInError(BackendError):
    """A sign-in that did not end with tokens: what happened, and what the person can do."""


def redirect_uri(port: int) -> str:
    return f"http://{HOST}:{port}{PATH}"


def free_port() -> int:
    """A loopback port nothing listens on now (for a new client registration's redirect URI)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


class Loopback:
    """One sign-in's listener: bound by `open`, waited on by `result`, closed by `close`."""

    def __init__(self, server: str, listener: anyio.abc.Listener[anyio.abc.SocketStream], state: str) -> None:
        self.server = server
        self._listener = listener
        self._state = state
        self._result: AuthorizationCodeResult | SignInError | None = None
        self._got = anyio.Event()

    @classmethod
    async def open(cls, server: str, authorization_url: str) -> Loopback:
        """Listen where `authorization_url`'s redirect_uri points, for its `state`."""
        query = parse_qs(urlsplit(authorization_url).query)
        # The last of each: the SDK appends its own after whatever the server's endpoint carries.
        state = (query.get("state") or [""])[-1]
        target = urlsplit((query.get("redirect_uri") or [""])[-1])
        if not state or target.hostname != HOST or target.port is None or target.path != PATH:
            raise SignInError(f"The sign-in to '{server}' has no loopback redirect emceepee can receive.")
        try:
            listener = await anyio.create_tcp_listener(local_host=HOST, local_port=target.port)
        except OSError as exc:
            raise SignInError(
                f"Cannot listen on {HOST}:{target.port} for the sign-in to '{server}': {exc.strerror}",
                hint=f"Free that port, or set another in [servers.{server}.oauth] redirect_port (a client "
                f"registered by emceepee gets a new port after `emceepee auth logout {server}`).",
            ) from exc
        return cls(server, listener, state)

    async def result(self) -> AuthorizationCodeResult:
        """Serve until this sign-in's redirect arrives (the caller bounds the wait)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._listener.serve, self._handle, tg)
            await self._got.wait()
            tg.cancel_scope.cancel()
        if isinstance(self._result, SignInError):
            raise self._result
        assert self._result is not None
        return self._result

    async def close(self) -> None:
        with contextlib.suppress(Exception), anyio.CancelScope(shield=True):
            await self._listener.aclose()

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            with contextlib.suppress(Exception), anyio.move_on_after(REQUEST_TIMEOUT_S):
                head = await _read_head(stream)
                status, page = self._answer(head)
                body = _page(page).encode()
                await stream.send(
                    f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n"
                    "Cache-Control: no-store\r\n\r\n".encode()
                    + body
                )

    def _answer(self, head: bytes | None) -> tuple[str, str]:
        """The response to one request, and what it settles (only this sign-in's redirect)."""
        line = head.split(b"\r\n", 1)[0].decode("latin-1") if head else ""
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != "GET":
            return "400 Bad Request", "This address only takes emceepee's sign-in redirect."
        target = urlsplit(parts[1])
        if target.path != PATH:
            return "404 Not Found", "This address only takes emceepee's sign-in redirect."
        query = parse_qs(target.query)
        state = (query.get("state") or [""])[0]
        if self._got.is_set() or not secrets.compare_digest(state.encode(), self._state.encode()):
            return "400 Bad Request", "This is not the sign-in emceepee is waiting for (its state differs)."
        error = (query.get("error") or [""])[0]
        if error:
            said = (query.get("error_description") or [""])[0][:200]
            self._settle(
                SignInError(
                    f"The sign-in to '{self.server}' was refused by its authorization server: "
                    f"{_printable(error)}{': ' + _printable(said) if said else ''}",
                    hint=f"Run `emceepee auth login {self.server}` to try again.",
                )
            )
            return "200 OK", f"Sign-in to {self.server} did not complete. You can close this tab."
        code = (query.get("code") or [""])[0]
        if not code:
            return "400 Bad Request", "The redirect carries no authorization code."
        issuer = query["iss"][0] if query.get("iss") else None
        self._settle(AuthorizationCodeResult(code=code, state=state, iss=issuer))
        return "200 OK", f"Signed in to {self.server}. You can close this tab and go back."

    def _settle(self, result: AuthorizationCodeResult | SignInError) -> None:
        self._result = result
        self._got.set()


async def _read_head(stream: anyio.abc.SocketStream) -> bytes | None:
    """The request's head (up to the blank line), or None when it is larger than a redirect's."""
    head = b""
    while b"\r\n\r\n" not in head and b"\n\n" not in head:
        chunk = await stream.receive(4096)
        head += chunk
        if len(head) > REQUEST_LIMIT:
            return None
    return head


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in text)[:200]


def _page(message: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>emceepee</title></head>"
        f"<body><p>{html.escape(message)}</p></body></html>"
    )
