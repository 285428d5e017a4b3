"""backends/connect.py's remote transports against real servers: the `auth` it is given signs the
requests of both Streamable HTTP and legacy SSE, an SSE server that never names its message
endpoint is failed in bounded time, and the GET that opens an SSE stream, refused, is heard as a
refusal of emceepee's credentials (backends/authorization.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Generator, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession

from emceepee_cli.backends import connect
from emceepee_cli.backends.authorization import Refusals, Unauthorized
from emceepee_cli.config import ServerSpec
from emceepee_cli.errors import BackendError
from tests.support import ROOT, text_of

pytestmark = pytest.mark.anyio


@contextmanager
def backend(script: str, *flags: str) -> Iterator[int]:
    path = ROOT / "tests" / "backends" / script
    process = subprocess.Popen([sys.executable, str(path), *flags], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield int(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(timeout=10)


class Stamp(httpx2.Auth):
    """An `auth` that puts its own Authorization on every request, as a sign-in would."""

    def __init__(self) -> None:
        self.signed: list[str] = []

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = "Bearer from-auth"
        self.signed.append(request.method)
        yield request


def opened(
    spec: ServerSpec, auth: httpx2.Auth | None = None, refusals: Refusals | None = None
) -> AbstractAsyncContextManager[tuple[connect.Streams, Any]]:
    return connect.open_transport(
        spec, log=None, on_stderr=print, on_problem=print, auth=auth, refusals=refusals
    )


@pytest.mark.parametrize(
    ("script", "path", "transport"), [("http_echo.py", "mcp", "http"), ("sse_echo.py", "sse", "sse")]
)
async def test_the_auth_given_signs_every_request_of_either_transport(
    script: str, path: str, transport: str
) -> None:
    stamp = Stamp()
    with backend(script) as port:
        spec = ServerSpec("remote", url=f"http://127.0.0.1:{port}/{path}", remote_transport=transport)  # type: ignore[arg-type]
        with anyio.fail_after(20):
            async with (
                opened(spec, auth=stamp) as ((read, write), process),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool("whoami", {})
    assert process is None
    assert text_of(result.content[0]) == "Bearer from-auth"
    assert "POST" in stamp.signed and (transport == "http" or "GET" in stamp.signed), stamp.signed


async def test_an_sse_server_that_never_names_its_endpoint_is_failed_in_bounded_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(connect, "SSE_OPEN_TIMEOUT_S", 1.0)
    with backend("sse_echo.py", "--mute") as port:
        spec = ServerSpec("mute", url=f"http://127.0.0.1:{port}/sse", remote_transport="sse")
        with anyio.fail_after(20), pytest.raises(BackendError) as caught:
            async with opened(spec):
                pytest.fail("the transport opened")
    assert caught.value.message == (
        "Backend 'mute' (transport sse) did not name its message endpoint within 1 s of connecting."
    )
    assert "often ending in /sse" in (caught.value.hint or "")


async def test_a_refused_sse_stream_is_heard_as_a_refusal_before_the_connection_fails() -> None:
    heard: list[Unauthorized] = []
    with backend("sse_echo.py", "--status", "401", "--challenge", 'Bearer realm="r"') as port:
        spec = ServerSpec("refused", url=f"http://127.0.0.1:{port}/sse", remote_transport="sse")
        refusals = Refusals(spec, {}, heard.append)
        with anyio.fail_after(20), pytest.raises(Exception) as caught:  # whatever the SDK raises
            async with opened(spec, refusals=refusals):
                pytest.fail("the transport opened")
    assert not isinstance(caught.value, BackendError)  # the SDK's own error: the refusal says why
    (refusal,) = heard
    assert refusal.message == (
        "Backend 'refused' requires authorization (HTTP 401 Unauthorized; Bearer realm=\"r\"): emceepee sent "
        "no credentials."
    )


async def test_only_an_sse_backends_get_is_a_refusal() -> None:
    for transport, expected in (("sse", [401]), ("http", [])):
        heard: list[Unauthorized] = []
        spec = ServerSpec("s", url="https://docs.example/sse", remote_transport=transport)  # type: ignore[arg-type]
        request = httpx2.Request("GET", "https://docs.example/sse")
        await Refusals(spec, {}, heard.append).on_response(httpx2.Response(401, request=request))
        await Refusals(spec, {}, heard.append).on_response(httpx2.Response(200, request=request))
        assert [refusal.status for refusal in heard] == expected
