"""Reaching one backend: its transport (a process we spawn, a Streamable HTTP endpoint, or a
legacy HTTP+SSE one) and the handshake in the era its config asks for (`legacy`, `modern` or
`auto`). Both remote transports use one kind of HTTP client: the server's headers, no read
timeout, the sign-in's `auth` when there is one, and the `refusals` hook."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from emceepee_cli.backends import transport
from emceepee_cli.backends.authorization import Refusals
from emceepee_cli.backends.environment import backend_env
from emceepee_cli.backends.launch import Launch
from emceepee_cli.backends.logfile import LogPlace
from emceepee_cli.config import ServerSpec
from emceepee_cli.errors import BackendError
from emceepee_cli.sdk import negotiate_auto
from emceepee_cli.signin.flow import Patience

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=None)  # a call may wait minutes on a parked question
# An SSE server names where to POST in its stream's first event; one that never does is failed
# (as long as a stdio handshake may take: listener.py's INITIALIZE_TIMEOUT_S).
SSE_OPEN_TIMEOUT_S = 60.0

Streams = tuple[Any, Any]  # the session's read and write streams (the SDK's or ours)


@asynccontextmanager
async def open_transport(
    spec: ServerSpec,
    *,
    log: LogPlace | None,
    on_stderr: Callable[[str], None],
    on_problem: Callable[[str], None],
    refusals: Refusals | None = None,
    auth: httpx2.Auth | None = None,
    patience: Patience | None = None,
    launch: Launch | None = None,
) -> AsyncIterator[tuple[Streams, transport.ProcessInfo | None]]:
    """The streams to an expanded `spec`, and its process (None for a remote backend). `refusals`
    hears a remote backend's refusals of emceepee's credentials (backends/authorization.py); with
    `auth` (signin/flow.py), which hears each request's final response after any sign-in instead,
    so the challenge that starts a sign-in is not taken for a refusal. `launch`: the host's
    environment and working directory, when serve is not the host's own process (backends/launch.py)."""
    if spec.transport == "http":
        assert spec.url is not None
        http = _http_client(dict(spec.headers), auth, refusals)
        async with http, streamable_http_client(spec.url, http_client=http) as (read, write):
            yield (read, write), None
        return
    if spec.transport == "sse":
        async with _sse_streams(spec, auth, refusals, patience) as streams:
            yield streams, None
        return
    assert spec.command is not None
    command, cwd = spec.command, spec.cwd
    if launch is not None:
        cwd = launch.cwd_for(cwd)
        command = launch.command_for(command, cwd)
    env = backend_env(spec.env, spec.pass_env, None if launch is None else launch.environ)
    try:
        opened = transport.open_stdio(
            command,
            spec.args,
            env=env,
            cwd=cwd,
            stderr_log=log,
            on_stderr=on_stderr,
            on_problem=on_problem,
        )
        async with opened as (read, write, process):
            yield (read, write), process
    except FileNotFoundError as exc:
        raise BackendError(
            f"Cannot start '{spec.command}': {exc.strerror}", hint="Check the server's `command`."
        ) from exc


def _http_client(
    headers: dict[str, str] | None, auth: httpx2.Auth | None, refusals: Refusals | None
) -> httpx2.AsyncClient:
    """The HTTP client of a remote backend, whichever its transport."""
    hooks = {"response": [refusals.on_response]} if refusals is not None and auth is None else {}
    return httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT, auth=auth, event_hooks=hooks)


@asynccontextmanager
async def _sse_streams(
    spec: ServerSpec, auth: httpx2.Auth | None, refusals: Refusals | None, patience: Patience | None
) -> AsyncIterator[Streams]:
    """The streams of a legacy HTTP+SSE backend, once its stream has named where to POST."""
    assert spec.url is not None

    def client(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return _http_client(headers, auth, refusals)  # HTTP_TIMEOUT, not the SDK's 5-minute idle limit

    with anyio.CancelScope(deadline=anyio.current_time() + SSE_OPEN_TIMEOUT_S) as opening:
        if patience is not None:  # a sign-in while the stream opens does not count against it
            patience.watch(opening, SSE_OPEN_TIMEOUT_S)
        try:
            async with sse_client(
                spec.url, dict(spec.headers), httpx_client_factory=client, auth=auth
            ) as streams:
                if patience is not None:
                    patience.forget(opening)
                opening.deadline = math.inf
                yield streams
                return
        finally:
            if patience is not None:
                patience.forget(opening)
    raise BackendError(
        f"Backend '{spec.name}' (transport sse) did not name its message endpoint within "
        f"{SSE_OPEN_TIMEOUT_S:.0f} s of connecting.",
        hint="Check that the url is the server's SSE stream (often ending in /sse), and that it is an SSE "
        'server: a Streamable HTTP one needs no `transport` (or transport = "http").',
    )


async def handshake(session: ClientSession, protocol: str) -> None:
    if protocol == "legacy":
        await session.initialize()
    elif protocol == "modern":
        await session.discover()
    else:
        await negotiate_auto(session)
