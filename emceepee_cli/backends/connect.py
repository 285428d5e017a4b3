"""Reaching one backend: its transport (a process we spawn, or a Streamable HTTP endpoint) and
the handshake in the era its config asks for (`legacy`, `modern` or `auto`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from emceepee_cli.backends import transport
from emceepee_cli.backends.authorization import Refusals
from emceepee_cli.backends.environment import backend_env
from emceepee_cli.backends.logfile import LogPlace
from emceepee_cli.config import ServerSpec
from emceepee_cli.errors import BackendError
from emceepee_cli.sdk import negotiate_auto

HTTP_TIMEOUT = httpx2.Timeout(30.0, read=None)  # a call may wait minutes on a parked question

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
) -> AsyncIterator[tuple[Streams, transport.ProcessInfo | None]]:
    """The streams to an expanded `spec`, and its process (None for a remote backend). `refusals`
    hears a remote backend's refusals of emceepee's credentials (backends/authorization.py); with
    `auth` (signin/flow.py) it hears each request's final response from the sign-in instead, so
    the challenge that starts a sign-in is not taken for a refusal."""
    if spec.transport == "http":
        assert spec.url is not None
        hooks = {"response": [refusals.on_response]} if refusals is not None and auth is None else {}
        http = httpx2.AsyncClient(
            headers=dict(spec.headers), timeout=HTTP_TIMEOUT, event_hooks=hooks, auth=auth
        )
        async with http, streamable_http_client(spec.url, http_client=http) as (read, write):
            yield (read, write), None
        return
    assert spec.command is not None
    env = backend_env(spec.env, spec.pass_env)
    try:
        opened = transport.open_stdio(
            spec.command,
            spec.args,
            env=env,
            cwd=spec.cwd,
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


async def handshake(session: ClientSession, protocol: str) -> None:
    if protocol == "legacy":
        await session.initialize()
    elif protocol == "modern":
        await session.discover()
    else:
        await negotiate_auto(session)
