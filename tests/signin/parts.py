"""The sign-in test backend (tests/backends/http_signin.py), started for a test: its base URL and
an HTTP client for it."""

from __future__ import annotations

import base64
import hashlib
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import httpx2

from tests.support import ROOT

REDIRECT = "http://127.0.0.1:9/callback"
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Mock:
    """A running sign-in backend and an HTTP client for it."""

    base: str
    http: httpx2.Client

    def metadata_path(self, resource: str) -> str:
        return f"{self.base}/.well-known/oauth-protected-resource/{resource}"

    def register(self, method: str | None = None) -> dict[str, Any]:
        asked: dict[str, Any] = {"redirect_uris": [REDIRECT], "client_name": "test"}
        asked |= {"token_endpoint_auth_method": method} if method else {}
        answer = self.http.post(f"{self.base}/register", json=asked)
        assert answer.status_code == 201
        return dict(answer.json())

    def authorize(self, client_id: str, verifier: str, **extra: str) -> dict[str, str]:
        """The parameters /authorize redirected back with."""
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        params = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "state": "st4te",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": f"{self.base}/mcp",
        } | extra
        answer = self.http.get(f"{self.base}/authorize?{urlencode(params)}")
        assert answer.status_code == 302 and answer.headers["location"].startswith(REDIRECT + "?")
        return {k: v[0] for k, v in parse_qs(urlparse(answer.headers["location"]).query).items()}

    def token(self, client: dict[str, Any], **form: str) -> httpx2.Response:
        """A token request, authenticated the way the client registered."""
        method = client.get("token_endpoint_auth_method")
        form = {"client_id": client["client_id"]} | form
        if method == "client_secret_basic":
            basic = (str(client["client_id"]), str(client["client_secret"]))
            return self.http.post(f"{self.base}/token", data=form, auth=basic)
        form |= {"client_secret": client["client_secret"]} if method == "client_secret_post" else {}
        return self.http.post(f"{self.base}/token", data=form)

    def sign_in(self, client: dict[str, Any], scope: str = "read", resource: str = "mcp") -> dict[str, Any]:
        verifier = secrets.token_urlsafe(48)
        target = f"{self.base}/{resource}"
        code = self.authorize(client["client_id"], verifier, scope=scope, resource=target)["code"]
        form = {"code": code, "redirect_uri": REDIRECT, "code_verifier": verifier, "resource": target}
        answer = self.token(client, grant_type="authorization_code", **form)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def mcp(self, token: str | None, message: dict[str, Any], path: str = "/mcp") -> httpx2.Response:
        headers = MCP_HEADERS | ({"authorization": f"Bearer {token}"} if token else {})
        return self.http.post(f"{self.base}{path}", json=message, headers=headers)


@contextmanager
def running(*flags: str) -> Iterator[Mock]:
    script = ROOT / "tests" / "backends" / "http_signin.py"
    process = subprocess.Popen([sys.executable, str(script), *flags], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        base = f"http://127.0.0.1:{int(process.stdout.readline())}"
        with httpx2.Client(timeout=5) as http:
            yield Mock(base, http)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert process.stdout.read() == ""  # the port line only: logs go to stderr


def sign_in_log(mock: Mock) -> list[dict[str, Any]]:
    """What the mock's authorization server saw (secrets hidden)."""
    return list(mock.http.get(f"{mock.base}/log").json())


def browser(folder: Path, *, looks: bool = True) -> dict[str, str]:
    """The environment that makes `$BROWSER` the test browser (tests/backends/follow_browser.py),
    which records each URL in `folder/opened` and, when the person `looks`, follows it."""
    script = folder / "follow-browser"
    follower = ROOT / "tests" / "backends" / "follow_browser.py"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{follower}" "$@"\n')
    script.chmod(0o755)
    return {"BROWSER": str(script), "FOLLOW_LOG": str(folder / "opened"), "FOLLOW_NOT": "0" if looks else "1"}


def opened(folder: Path) -> list[str]:
    """The URLs the test browser was asked to open."""
    path = folder / "opened"
    return path.read_text().splitlines() if path.exists() else []
