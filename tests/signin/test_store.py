"""The token files (signin/store.py): one per server, 0600 in a 0700 folder, bound to the server's
URL, written whole; what is said of them never holds a token; files that are not emceepee's are
ignored, not trusted."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from emceepee_cli import redact
from emceepee_cli.signin import store
from emceepee_cli.signin.store import TokenStore

pytestmark = pytest.mark.anyio

URL = "https://tracker.example/mcp"
TOKEN = OAuthToken(
    access_token="at-5e1f0c9a7b", expires_in=3600, scope="read write", refresh_token="rt-88c1d2e3f4"
)
CLIENT = OAuthClientInformationFull(
    client_id="client-1",
    client_secret="cs-7a6b5c4d3e",
    redirect_uris=["http://127.0.0.1:47123/callback"],  # type: ignore[list-item]
)


async def test_tokens_and_client_are_kept_in_a_private_file_bound_to_the_url() -> None:
    kept = TokenStore("tracker", URL)
    assert await kept.get_tokens() is None and kept.state().signed_in is False
    await kept.set_client_info(CLIENT)
    await kept.set_tokens(TOKEN)

    again = TokenStore("tracker", URL)
    assert await again.get_tokens() == TOKEN
    assert (await again.get_client_info()) == CLIENT
    assert again.redirect_port() == 47123
    expires = again.expires_at()
    assert expires is not None and abs(expires - (time.time() + 3600)) < 60
    assert stat.S_IMODE(again.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(again.path.parent.stat().st_mode) == 0o700
    assert [p.name for p in again.path.parent.iterdir()] == ["tracker.json"]  # no draft left behind

    elsewhere = TokenStore("tracker", "https://other.example/mcp")
    assert await elsewhere.get_tokens() is None and await elsewhere.get_client_info() is None
    assert elsewhere.state().other_url and not elsewhere.state().signed_in


async def test_what_is_said_of_a_sign_in_holds_no_token_and_logs_hide_them() -> None:
    kept = TokenStore("tracker", URL)
    await kept.set_client_info(CLIENT)
    await kept.set_tokens(TOKEN)
    state = kept.state()
    said = json.dumps(state.to_json()) + repr(state)
    assert state.signed_in and state.refreshable and state.scopes == ("read", "write")
    for secret in ("at-5e1f0c9a7b", "rt-88c1d2e3f4", "cs-7a6b5c4d3e"):
        assert secret not in said
        assert secret not in redact.redact(f"a log line quoting {secret}")


async def test_forgetting_tokens_keeps_the_registration_and_forget_removes_all() -> None:
    kept = TokenStore("tracker", URL)
    await kept.set_client_info(CLIENT)
    await kept.set_tokens(TOKEN)
    kept.forget_tokens()
    assert await kept.get_tokens() is None and await kept.get_client_info() == CLIENT
    assert kept.forget() is True and kept.forget() is False
    assert not kept.path.exists()


async def test_a_preregistered_client_comes_from_the_config_and_is_never_written() -> None:
    kept = TokenStore("tracker", URL, preregistered=CLIENT)
    assert await kept.get_client_info() == CLIENT
    await kept.set_client_info(CLIENT)
    await kept.set_tokens(TOKEN)
    assert "cs-7a6b5c4d3e" not in kept.path.read_text()


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[1, 2]",
        json.dumps({"url": URL, "tokens": {"access_token": 5}}).encode(),
        json.dumps({"url": URL, "tokens": "x", "client": [], "expires_at": "soon"}).encode(),
        b"{" + b" " * (store.FILE_LIMIT + 1) + b"}",
        b"\xff\xfe\x00",
    ],
)
async def test_a_token_file_that_is_not_emceepees_is_ignored(content: bytes) -> None:
    kept = TokenStore("tracker", URL)
    kept.path.parent.mkdir(parents=True, mode=0o700)
    kept.path.write_bytes(content)
    assert await kept.get_tokens() is None and await kept.get_client_info() is None
    assert kept.expires_at() is None and kept.redirect_port() is None
    assert kept.state().signed_in is False
    await kept.set_tokens(TOKEN)  # a sign-in replaces it
    assert await kept.get_tokens() == TOKEN


def test_a_server_name_that_is_not_a_file_name_gets_a_digest(emceepee_home: Path) -> None:
    for name in ("../../etc/passwd", "a/b", "", "x" * 300):
        path = store.file_for(name)
        assert path.parent == store.folder() and path.name.endswith(".json") and "/" not in path.stem
        assert ".." not in path.name
    assert store.file_for("tracker").name == "tracker.json"
    assert os.path.commonpath([store.folder(), emceepee_home]) == str(emceepee_home)
