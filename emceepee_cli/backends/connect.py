"""Reaching one backend: its transport (a process we spawn, a Streamable HTTP endpoint, or a
legacy HTTP+SSE one) and the handshake in the era its config asks for (`legacy`, `modern` or
`auto`). Both remote transports use one kind of HTTP client: the server's headers, no read
timeout, the sign-in's `auth` when there is one, and the `refusals` hook; the sign-in's own
requests (signin/flow.py) go through it too. Its proxies and the CA it trusts come from an
environment as httpx reads them (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY` in either
case; `SSL_CERT_FILE`, else `SSL_CERT_DIR`): emceepee's own in-process, the host's in the fleet
(`network`), whose own environment has none of them."""

from __future__ import annotations

import ipaddress
import math
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
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
        http = _http_client(dict(spec.headers), auth, refusals, launch)
        async with http, streamable_http_client(spec.url, http_client=http) as (read, write):
            yield (read, write), None
        return
    if spec.transport == "sse":
        async with _sse_streams(spec, auth, refusals, patience, launch) as streams:
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
    headers: dict[str, str] | None,
    auth: httpx2.Auth | None,
    refusals: Refusals | None,
    launch: Launch | None = None,
) -> httpx2.AsyncClient:
    """The HTTP client of a remote backend, whichever its transport; with `launch`, its proxies and
    CA are the host's (`network`), else what httpx reads from emceepee's environment."""
    hooks = {"response": [refusals.on_response]} if refusals is not None and auth is None else {}
    if launch is None:
        return httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT, auth=auth, event_hooks=hooks)
    verify, mounts = network(launch.environ)
    return httpx2.AsyncClient(
        headers=headers,
        timeout=HTTP_TIMEOUT,
        auth=auth,
        event_hooks=hooks,
        trust_env=False,
        verify=verify,
        mounts=mounts,
    )


def network(
    environ: Mapping[str, str],
) -> tuple[ssl.SSLContext | bool, dict[str, httpx2.AsyncBaseTransport | None]]:
    """What httpx's `trust_env` would take from `environ` instead of emceepee's: the CA to trust
    (True: the system's), and a transport per URL pattern (a proxy; None: straight, `NO_PROXY`)."""
    verify: ssl.SSLContext | bool = True
    match trusted_ca(environ):
        case ("SSL_CERT_FILE", cafile):
            verify = ssl.create_default_context(cafile=cafile)
        case (_, capath):
            verify = ssl.create_default_context(capath=capath)
    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {
        pattern: None
        if proxy is None
        else httpx2.AsyncHTTPTransport(verify=verify, trust_env=False, proxy=httpx2.Proxy(proxy))
        for pattern, proxy in proxies(environ).items()
    }
    return verify, mounts


def trusted_ca(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The CA bundle `environ` names, as httpx reads it: `SSL_CERT_FILE`, else `SSL_CERT_DIR`
    (`(variable, value)`); None: the system's."""
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        if value := environ.get(name):
            return name, value
    return None


def proxies(environ: Mapping[str, str]) -> dict[str, str | None]:
    """The proxy of each URL pattern that `environ` sets, as httpx reads the process's (urllib's
    `getproxies_environment`, then httpx's `get_environment_proxies`): a lowercase `x_proxy` wins
    over its uppercase twin, one set empty unsets it, `NO_PROXY=*` turns them all off, an entry
    httpx could not parse is left out."""
    found = _proxy_vars(environ)
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if proxy := found.get(scheme):
            mounts[f"{scheme}://"] = proxy if "://" in proxy else f"http://{proxy}"
    for host in (entry.strip() for entry in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if host and (pattern := _no_proxy_pattern(host)) is not None:
            mounts[pattern] = None
    return {pattern: proxy for pattern, proxy in mounts.items() if _valid_pattern(pattern)}


def _proxy_vars(environ: Mapping[str, str]) -> dict[str, str]:
    """`{scheme: value}` of the `*_proxy` variables, as urllib's `getproxies_environment` reads them."""
    found: dict[str, str] = {}
    for name, value in environ.items():
        if value and name.lower().endswith("_proxy"):
            found[name.lower()[:-6]] = value
    if "REQUEST_METHOD" in environ:  # a CGI request's `Proxy:` header would be HTTP_PROXY
        found.pop("http", None)
    for name, value in environ.items():
        if name.endswith("_proxy"):
            if value:
                found[name[:-6].lower()] = value
            else:
                found.pop(name[:-6].lower(), None)
    return found


def _no_proxy_pattern(host: str) -> str | None:
    """The URL pattern of one `NO_PROXY` entry (curl's reading, as httpx does it); None: httpx
    skips it."""
    if "://" in host:
        return host
    if _is_ip(host, ipaddress.IPv4Address):
        return f"all://{host}"
    if _is_ip(host, ipaddress.IPv6Address):
        address, slash, subnet = host.partition("/")
        return f"all://[{address}]/{subnet}" if slash else f"all://[{host}]"
    if host.lower() == "localhost" or host.startswith("[") or (host.startswith("*.") and "/" not in host):
        return f"all://{host}"
    return None if "/" in host else f"all://*{host}"


def _is_ip(host: str, kind: type[ipaddress.IPv4Address] | type[ipaddress.IPv6Address]) -> bool:
    try:
        kind(host.split("/")[0])
    except ValueError:
        return False
    return True


def _valid_pattern(pattern: str) -> bool:
    """Whether httpx takes `pattern` as a mount (what its URL pattern refuses, an unusable entry)."""
    if ":" not in pattern:
        return False
    try:
        url = httpx2.URL(pattern)
    except (httpx2.InvalidURL, ValueError, TypeError):
        return False
    prefix = url.path.removeprefix("/")
    if not prefix or not (_is_ip(url.host, ipaddress.IPv4Address) or _is_ip(url.host, ipaddress.IPv6Address)):
        return True
    host = f"[{url.host}]" if ":" in url.host else url.host
    if "@" in pattern or "%" in pattern or not prefix.isdigit() or not pattern.endswith(f"{host}/{prefix}"):
        return False
    try:
        ipaddress.ip_network(f"{url.host}/{prefix}", strict=False)
    except ValueError:
        return False
    return True


@asynccontextmanager
async def _sse_streams(
    spec: ServerSpec,
    auth: httpx2.Auth | None,
    refusals: Refusals | None,
    patience: Patience | None,
    launch: Launch | None,
) -> AsyncIterator[Streams]:
    """The streams of a legacy HTTP+SSE backend, once its stream has named where to POST."""
    assert spec.url is not None

    def client(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return _http_client(
            headers, auth, refusals, launch
        )  # HTTP_TIMEOUT, not the SDK's 5-minute idle limit

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
