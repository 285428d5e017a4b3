"""The sign-in backend (tests/backends/http_signin.py) over real HTTP: its discovery documents, its
authorization server's refusals and its challenges are what the sign-in tests rely on."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from urllib.parse import urlencode

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.signin.parts import REDIRECT, Mock, running

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
WHOAMI = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}


@pytest.fixture(scope="module")
def mock() -> Iterator[Mock]:
    flags = ("--sse", "--scopes-supported", "read admin offline_access", "--challenge-scope", "read")
    with running(*flags) as mock:
        yield mock


@pytest.fixture(scope="module")
def strict() -> Iterator[Mock]:
    flags = ("--no-dcr", "--pre-registered", "app:s3cret", "--pre-registered", "public:")
    with running(*flags, "--refuse-refresh", "--revoke-after", "2", "--step-up", "admin") as mock:
        yield mock


def test_the_discovery_documents_name_the_resource_and_its_authorization_server(mock: Mock) -> None:
    resource = mock.http.get(mock.metadata_path("mcp")).json()
    legacy = mock.http.get(mock.metadata_path("sse")).json()
    server = mock.http.get(f"{mock.base}/.well-known/oauth-authorization-server").json()
    assert mock.http.get(mock.metadata_path("other")).status_code == 404
    assert resource["resource"] == f"{mock.base}/mcp" and legacy["resource"] == f"{mock.base}/sse"
    assert resource["authorization_servers"] == [mock.base]
    assert resource["scopes_supported"] == server["scopes_supported"] == ["read", "admin", "offline_access"]
    assert server["issuer"] == mock.base and server["registration_endpoint"] == f"{mock.base}/register"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert set(server["token_endpoint_auth_methods_supported"]) == {
        "client_secret_basic",
        "client_secret_post",
        "none",
    }


def test_a_request_without_a_live_token_is_answered_401_pointing_at_the_metadata(mock: Mock) -> None:
    bare = mock.mcp(None, INITIALIZE)
    forged = mock.mcp("forged", INITIALIZE)
    legacy = mock.http.get(f"{mock.base}/sse")
    where = f'resource_metadata="{mock.metadata_path("mcp")}"'
    assert bare.status_code == forged.status_code == legacy.status_code == 401
    assert bare.headers["www-authenticate"] == f'Bearer {where}, scope="read"'
    assert forged.headers["www-authenticate"] == f'Bearer {where}, scope="read", error="invalid_token"'
    assert legacy.headers["www-authenticate"].startswith(
        f'Bearer resource_metadata="{mock.metadata_path("sse")}"'
    )


def test_a_registered_client_signs_in_and_its_token_opens_only_its_resource(mock: Mock) -> None:
    client = mock.register()
    tokens = mock.sign_in(client, scope="read offline_access")
    assert client["token_endpoint_auth_method"] == "client_secret_basic" and client["client_secret"]
    assert tokens["token_type"] == "Bearer" and tokens["scope"] == "read offline_access"
    assert tokens["expires_in"] == 3600 and tokens["refresh_token"]
    assert mock.mcp(tokens["access_token"], INITIALIZE).status_code == 200
    assert (
        mock.http.get(
            f"{mock.base}/sse", headers={"authorization": "Bearer " + tokens["access_token"]}
        ).status_code
        == 401
    )


def test_a_token_for_the_legacy_resource_opens_the_sse_stream(mock: Mock) -> None:
    tokens = mock.sign_in(mock.register(), resource="sse")
    headers = {"authorization": f"Bearer {tokens['access_token']}", "accept": "text/event-stream"}
    with mock.http.stream("GET", f"{mock.base}/sse", headers=headers) as stream:
        lines = stream.iter_lines()
        first = [next(lines), next(lines)]
    assert stream.status_code == 200
    assert first[0] == "event: endpoint" and first[1].startswith("data: /messages/?session_id=")


@pytest.mark.anyio
async def test_whoami_answers_the_scopes_of_the_calls_token_and_never_the_token(mock: Mock) -> None:
    tokens = mock.sign_in(mock.register(), scope="read admin")
    headers = {"authorization": f"Bearer {tokens['access_token']}"}
    with anyio.fail_after(5):
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            streamable_http_client(f"{mock.base}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            echoed = await session.call_tool("echo", {"text": "hello"})
            whoami = await session.call_tool("whoami", {})
    assert [block.model_dump()["text"] for block in (*echoed.content, *whoami.content)] == [
        "hello",
        "read admin",
    ]


def test_the_authorization_redirect_carries_code_and_state(mock: Mock) -> None:
    client = mock.register(method="none")
    answer = mock.authorize(client["client_id"], secrets.token_urlsafe(48))
    unknown = mock.http.get(f"{mock.base}/authorize?client_id=nobody&redirect_uri={REDIRECT}")
    plain = mock.authorize(client["client_id"], "v" * 43, code_challenge_method="plain")
    assert answer["state"] == "st4te" and answer["code"]
    assert unknown.status_code == 400 and "location" not in unknown.headers
    assert plain["error"] == "invalid_request" and "code" not in plain


def test_the_token_endpoint_refuses_a_wrong_verifier_a_reused_code_and_a_moved_redirect(mock: Mock) -> None:
    client = mock.register(method="client_secret_post")
    verifier = secrets.token_urlsafe(48)

    def exchange(verifier_sent: str, redirect: str = REDIRECT, **extra: str) -> httpx2.Response:
        code = extra.pop("code", None) or mock.authorize(client["client_id"], verifier)["code"]
        form = {"code": code, "redirect_uri": redirect, "code_verifier": verifier_sent} | extra
        return mock.token(client, grant_type="authorization_code", **form)

    wrong = exchange(secrets.token_urlsafe(48))
    moved = exchange(verifier, "http://127.0.0.1:10/callback")
    foreign = exchange(verifier, resource="http://elsewhere.example/mcp")
    code = mock.authorize(client["client_id"], verifier)["code"]
    first, again = exchange(verifier, code=code), exchange(verifier, code=code)
    assert [r.json()["error"] for r in (wrong, moved, again)] == ["invalid_grant"] * 3
    assert foreign.json()["error"] == "invalid_target" and first.status_code == 200


def test_a_client_authenticates_only_as_it_registered(mock: Mock) -> None:
    client = mock.register(method="client_secret_post")
    verifier = secrets.token_urlsafe(48)
    code = mock.authorize(client["client_id"], verifier)["code"]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
    }
    answer = mock.token({**client, "token_endpoint_auth_method": "client_secret_basic"}, **form)
    assert answer.status_code == 401 and answer.json()["error"] == "invalid_client"


def test_a_refresh_rotates_the_refresh_token(mock: Mock) -> None:
    client = mock.register()
    first = mock.sign_in(client)
    second = mock.token(client, grant_type="refresh_token", refresh_token=first["refresh_token"]).json()
    reused = mock.token(client, grant_type="refresh_token", refresh_token=first["refresh_token"])
    assert second["refresh_token"] != first["refresh_token"] and second["scope"] == "read"
    assert reused.json()["error"] == "invalid_grant"
    assert mock.mcp(second["access_token"], INITIALIZE).status_code == 200


def test_the_log_shows_what_was_asked_and_hides_every_secret(mock: Mock) -> None:
    client = mock.register(method="client_secret_post")
    tokens = mock.sign_in(client, scope="read admin")
    mock.token(client, grant_type="refresh_token", refresh_token=tokens["refresh_token"])
    log = mock.http.get(f"{mock.base}/log").json()
    text = json.dumps(log)
    for secret in (client["client_secret"], tokens["access_token"], tokens["refresh_token"]):
        assert secret not in text
    mine = [e for e in log if e["params"].get("client_id") == client["client_id"]]
    authorize, exchange, refresh = mine[-3:]
    assert (
        authorize["params"]["scope"] == "read admin"
        and authorize["params"]["code_challenge_method"] == "S256"
    )
    assert authorize["params"]["resource"] == f"{mock.base}/mcp"
    assert exchange["params"]["code"] == exchange["params"]["code_verifier"] == "<set>"
    assert exchange["params"]["client_secret"] == refresh["params"]["refresh_token"] == "<set>"
    assert exchange["auth_method"] == refresh["auth_method"] == "client_secret_post"
    assert refresh["params"]["grant_type"] == "refresh_token"


def test_a_pre_registered_client_signs_in_without_registration(strict: Mock) -> None:
    server = strict.http.get(f"{strict.base}/.well-known/oauth-authorization-server").json()
    app = {"client_id": "app", "client_secret": "s3cret", "token_endpoint_auth_method": "client_secret_post"}
    public = {"client_id": "public", "token_endpoint_auth_method": "none"}
    wrong = strict.token({**app, "client_secret": "guess"}, grant_type="refresh_token", refresh_token="x")
    assert "registration_endpoint" not in server and "scopes_supported" not in server
    assert strict.http.post(f"{strict.base}/register", json={"redirect_uris": [REDIRECT]}).status_code == 404
    assert wrong.json()["error"] == "invalid_client"
    assert strict.sign_in(app)["scope"] == "read" and strict.sign_in(public)["access_token"]


def test_step_up_refresh_refusal_and_revocation_answer_as_asked(strict: Mock) -> None:
    public = {"client_id": "public", "token_endpoint_auth_method": "none"}
    narrow, wide = strict.sign_in(public, scope="read"), strict.sign_in(public, scope="read admin")
    refresh = strict.token(public, grant_type="refresh_token", refresh_token=narrow["refresh_token"])
    stepped = strict.mcp(narrow["access_token"], WHOAMI)
    assert refresh.status_code == 400 and refresh.json()["error"] == "invalid_grant"
    assert stepped.status_code == 403
    where = f'resource_metadata="{strict.metadata_path("mcp")}"'
    assert (
        stepped.headers["www-authenticate"]
        == f'Bearer error="insufficient_scope", scope="admin read", {where}'
    )
    statuses = [strict.mcp(wide["access_token"], INITIALIZE).status_code for _ in range(3)]
    assert statuses == [200, 200, 401]


def test_hostile_requests_are_refused_without_a_redirect_and_the_server_keeps_answering(mock: Mock) -> None:
    client = mock.register(method="none")
    not_json = mock.http.post(
        f"{mock.base}/register", content=b"{nope", headers={"content-type": "application/json"}
    )
    no_uris = mock.http.post(f"{mock.base}/register", json={"redirect_uris": "http://127.0.0.1:9/"})
    elsewhere = {"client_id": client["client_id"], "redirect_uri": "http://evil.example/cb", "state": "s"}
    open_redirect = mock.http.get(f"{mock.base}/authorize?{urlencode(elsewhere)}")
    garbled = mock.http.post(
        f"{mock.base}/token", data={"grant_type": "x"}, headers={"authorization": "Basic !!"}
    )
    odd_grant = mock.token(client, grant_type="password", username="a", password="b")
    assert not_json.json()["error"] == "invalid_client_metadata"
    assert no_uris.json()["error"] == "invalid_redirect_uri"
    assert open_redirect.status_code == 400 and "location" not in open_redirect.headers
    assert garbled.status_code == 401 and garbled.json()["error"] == "invalid_client"
    assert odd_grant.json()["error"] == "unsupported_grant_type"
    assert "b" not in [e["params"].get("password") for e in mock.http.get(f"{mock.base}/log").json()]
    counts = mock.http.get(f"{mock.base}/counts").json()
    assert counts["/register POST"] >= 3 and counts["/token POST"] >= 2


def test_a_refused_authorization_redirects_with_access_denied_and_the_state() -> None:
    with running("--deny") as denying:
        client = denying.register(method="none")
        answer = denying.authorize(client["client_id"], secrets.token_urlsafe(48))
        assert answer == {
            "state": "st4te",
            "error": "access_denied",
            "error_description": "the person said no",
        }
