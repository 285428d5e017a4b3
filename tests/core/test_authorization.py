"""What emceepee says of a remote server's 401 or 403 (backends/authorization.py): the challenge's
scheme, realm, error and scope, what to set, and never a header value sent, however the server's
`WWW-Authenticate` is written."""

from __future__ import annotations

import httpx2
import pytest

from emceepee_cli.backends.authorization import Refusals, Unauthorized, unauthorized
from emceepee_cli.config import ServerSpec

pytestmark = pytest.mark.anyio

SPEC = ServerSpec("my-docs", url="https://docs.example/mcp", headers={"Authorization": "Bearer ${DOCS}"})
SENT = {"Authorization": "Bearer tok-9f8e7d6c5b"}


def said(challenge: str, status: int = 401, sent: dict[str, str] | None = None) -> Unauthorized:
    return unauthorized(SPEC, status, challenge, SENT if sent is None else sent)


def test_the_challenge_is_named_and_nothing_sent_is_said() -> None:
    refusal = said('Bearer realm="docs", error="invalid_token", error_description="expired"')
    assert refusal.message == (
        "Backend 'my-docs' requires authorization (HTTP 401 Unauthorized; Bearer realm=\"docs\", "
        'error="invalid_token"): emceepee sent the header(s) Authorization (values not shown) and the '
        "server did not accept them."
    )
    assert "Check the token" in (refusal.hint or "") and "tok-9f8e7d6c5b" not in str(refusal)


@pytest.mark.parametrize(
    "challenge",
    [
        'Bearer realm="tok-9f8e7d6c5b"',  # the token quoted back
        'Bearer realm="Bearer tok-9f8e7d6c5b"',  # the whole header quoted back
        "Bearer scope=tok-9f8e7d6c5b",  # unquoted
        'Bearer error="x tok-9f8e7d6c5b y"',  # inside another value
    ],
)
def test_a_challenge_quoting_what_was_sent_is_not_repeated(challenge: str) -> None:
    refusal = said(challenge)
    assert "tok-9f8e7d6c5b" not in str(refusal)
    assert "(HTTP 401 Unauthorized; Bearer)" in refusal.message


@pytest.mark.parametrize(
    ("challenge", "shown"),
    [
        ("", "(HTTP 403 Forbidden)"),
        ("\x1b[31mEvil\x1b[0m realm=x", "(HTTP 403 Forbidden)"),  # not a scheme: nothing quoted
        ('Bearer realm="a\x07b\nc"', '(HTTP 403 Forbidden; Bearer realm="a?b?c")'),
        ('Bearer realm="' + "r" * 5000 + '"', '(HTTP 403 Forbidden; Bearer realm="' + "r" * 80 + '")'),
        ('Bearer realm="say \\"hi\\""', "(HTTP 403 Forbidden; Bearer realm=\"say 'hi'\")"),
    ],
)
def test_a_hostile_challenge_is_bounded_and_plain(challenge: str, shown: str) -> None:
    assert shown in said(challenge, status=403).message


def test_no_credentials_sent_says_what_to_set_in_the_config_or_the_cli() -> None:
    bare = ServerSpec("my-docs", url="https://docs.example/mcp")
    hint = unauthorized(bare, 401, "Bearer", {}).hint or ""
    assert 'headers = { Authorization = "Bearer ${MY_DOCS_TOKEN}" } in [servers.my-docs]' in hint
    assert (
        "emceepee servers add my-docs --url 'https://docs.example/mcp' "
        "-H 'Authorization=Bearer ${MY_DOCS_TOKEN}' --replace" in hint
    )


def test_an_oauth_server_is_told_apart() -> None:
    challenge = 'Bearer resource_metadata="https://docs.example/.well-known/oauth-protected-resource"'
    hint = said(challenge).hint or ""
    assert "without the Authorization header" in hint and "emceepee auth login my-docs" in hint


def test_a_refusal_after_a_sign_in_says_to_sign_in_again() -> None:
    spec = ServerSpec("tracker", url="https://tracker.example/mcp")
    refused = unauthorized(spec, 401, 'Bearer error="invalid_token"', {}, signed_in=True)
    assert "did not accept emceepee's sign-in" in refused.message
    assert "emceepee auth login tracker" in (refused.hint or "")
    more = unauthorized(spec, 403, 'Bearer error="insufficient_scope", scope="admin"', {}, signed_in=True)
    assert 'scope="admin"' in more.message and "permission" in (more.hint or "")


async def test_refusals_keep_a_refused_request_by_its_id_and_tells_the_backend() -> None:
    heard: list[Unauthorized] = []
    refusals = Refusals(SPEC, SENT, heard.append)
    request = httpx2.Request(
        "POST", "https://docs.example/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "x"}
    )
    await refusals.on_response(httpx2.Response(401, request=request, headers={"www-authenticate": "Bearer"}))
    notification = httpx2.Request("POST", "https://docs.example/mcp", json={"jsonrpc": "2.0", "method": "y"})
    await refusals.on_response(httpx2.Response(403, request=notification))
    await refusals.on_response(
        httpx2.Response(401, request=httpx2.Request("GET", "https://docs.example/mcp"))
    )
    await refusals.on_response(httpx2.Response(500, request=request))
    assert refusals.take("7") is not None and refusals.take(7) is None  # once, "7" and 7 being one id
    assert [refusal.status for refusal in heard] == [401, 403]  # POSTs only, refusals only
