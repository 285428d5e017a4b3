"""The loopback listener of one sign-in (signin/loopback.py): it takes only this sign-in's redirect
(its `state`), answers anything else with an error page and goes on waiting, bounds what it reads,
and is closed after."""

from __future__ import annotations

from urllib.parse import urlencode

import anyio
import httpx2
import pytest

from emceepee_cli.signin import flow, loopback
from emceepee_cli.signin.loopback import Loopback, SignInError

pytestmark = pytest.mark.anyio


def authorization_url(port: int, state: str = "st-123") -> str:
    query = urlencode({"state": state, "redirect_uri": loopback.redirect_uri(port), "client_id": "c"})
    return f"https://auth.example/authorize?{query}"


async def test_only_the_redirect_with_this_sign_ins_state_settles_it() -> None:
    port = loopback.free_port()
    listening = await Loopback.open("tracker", authorization_url(port))
    base = loopback.redirect_uri(port)
    answers: list[tuple[int, str]] = []

    async def visit() -> None:
        async with httpx2.AsyncClient(timeout=5) as http:
            for url in (
                f"{base}?code=evil&state=other",  # another sign-in's (or a guess)
                f"http://127.0.0.1:{port}/favicon.ico",
                f"{base}?state=st-123",  # no code
                f"{base}?code=c-1&state=st-123",
                f"{base}?code=c-2&state=st-123",  # too late: the first one won
            ):
                try:
                    response = await http.get(url)
                    answers.append((response.status_code, response.text))
                except httpx2.HTTPError:
                    answers.append((0, "closed"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(visit)
            result = await listening.result()
            await listening.close()
    assert result.code == "c-1" and result.state == "st-123"
    assert [status for status, _ in answers] == [400, 404, 400, 200, 0]
    assert "Signed in to tracker" in answers[3][1] and "evil" not in answers[0][1]


async def test_a_refusal_by_the_authorization_server_ends_the_sign_in_with_why() -> None:
    port = loopback.free_port()
    listening = await Loopback.open("tracker", authorization_url(port))

    async def visit() -> None:
        async with httpx2.AsyncClient(timeout=5) as http:
            await http.get(
                f"{loopback.redirect_uri(port)}?error=access_denied&error_description=no%0d%0athanks&state=st-123"
            )

    errors: list[SignInError] = []

    async def wait() -> None:
        try:
            await listening.result()
        except SignInError as exc:
            errors.append(exc)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(visit)
            tg.start_soon(wait)
    await listening.close()
    [refused] = errors
    assert "access_denied" in refused.message and "\r" not in refused.message
    assert "emceepee auth login tracker" in (refused.hint or "")


async def test_hostile_requests_are_bounded_and_do_not_settle_anything() -> None:
    port = loopback.free_port()
    listening = await Loopback.open("tracker", authorization_url(port))

    async def hostile() -> None:
        huge = b"GET /callback?" + b"a" * (loopback.REQUEST_LIMIT + 10) + b" HTTP/1.1\r\n\r\n"
        for raw in (
            huge,
            b"POST /callback?code=x&state=st-123 HTTP/1.1\r\n\r\n",
            b"\x00\xff garbage\r\n\r\n",
        ):
            stream = await anyio.connect_tcp("127.0.0.1", port)
            async with stream:
                await stream.send(raw)
                reply = await stream.receive(65536)
                assert not reply.startswith(b"HTTP/1.1 200")
        silent = await anyio.connect_tcp("127.0.0.1", port)  # says nothing: others are still served
        async with silent, httpx2.AsyncClient(timeout=5) as http:
            ok = await http.get(f"{loopback.redirect_uri(port)}?code=c-9&state=st-123")
            assert ok.status_code == 200

    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            tg.start_soon(hostile)
            result = await listening.result()
    await listening.close()
    assert result.code == "c-9"
    with pytest.raises(OSError):
        await anyio.connect_tcp("127.0.0.1", port)  # closed after the sign-in


async def test_an_authorization_url_without_a_loopback_redirect_is_refused() -> None:
    for url in (
        "https://auth.example/authorize?state=s&redirect_uri=https://evil.example/cb",
        "https://auth.example/authorize?redirect_uri=http://127.0.0.1:5000/callback",
        "https://auth.example/authorize?state=s&redirect_uri=http://127.0.0.1/callback",
    ):
        with pytest.raises(SignInError):
            await Loopback.open("tracker", url)


async def test_a_port_in_use_says_how_to_choose_another() -> None:
    port = loopback.free_port()
    busy = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    async with busy:
        with pytest.raises(SignInError) as refused:
            await Loopback.open("tracker", authorization_url(port))
    assert "redirect_port" in (refused.value.hint or "")


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd?state=s",
        "javascript:alert(1)",
        "http://auth.example/authorize?state=s",  # plain http to another machine
        "https://auth.example/authorize?state=" + "s" * 9000,
        "vscode://open?url=x",
    ],
)
def test_an_authorization_url_a_person_should_not_be_sent_to_is_refused(url: str) -> None:
    with pytest.raises(SignInError) as refused:
        flow.check_authorization_url("tracker", url)
    assert "does not open" in refused.value.message and len(refused.value.message) < 600


def test_https_and_loopback_http_authorization_urls_are_opened() -> None:
    for url in (
        "https://auth.example/authorize?state=s",
        "http://localhost:8080/authorize",
        "http://127.0.0.1/a",
    ):
        flow.check_authorization_url("tracker", url)
