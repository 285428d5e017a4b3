"""The tokens and client registration kept for one remote backend: one file per server in the
data folder's `signin/` (0700), each 0600, replaced whole on every write (a crash leaves the old file
or the new one, never half of each).

The file is bound to the server's URL: tokens stored for another URL are never sent (a config that
now points the name elsewhere signs in afresh). Tokens are secrets: each one read or written is
registered with `redact`, so a log line or error that quotes one shows a placeholder, and
`SignInState` (what `emceepee auth status`, `doctor` and `list_servers` show) carries none.

It is the SDK's `TokenStorage` (mcp.client.auth), plus what the SDK does not keep: when the access
token expires (an absolute time, so a restart still refreshes before expiry) and the loopback port
the client was registered with (a dynamically registered client keeps its redirect URI).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import ValidationError

from emceepee_cli import paths, redact

FILE_LIMIT = 256 * 1024  # a token file larger than this was not written by emceepee: ignored
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def folder() -> Path:
    """Where the token files live."""
    return paths.data_dir() / "signin"


def file_for(server: str) -> Path:
    """The token file of `server` (a name that is not a plain file name gets its digest)."""
    stem = server if _SAFE_NAME.fullmatch(server) else hashlib.sha256(server.encode()).hexdigest()[:32]
    return folder() / f"{stem}.json"


@dataclass(frozen=True)
class SignInState:
    """What may be said of a server's sign-in: never a token."""

    server: str
    url: str
    signed_in: bool
    expires_at: str | None = None  # ISO 8601 (UTC), when the access token expires; None: not said
    scopes: tuple[str, ...] = ()
    refreshable: bool = False  # a refresh token is kept: expiry renews without the person
    other_url: bool = False  # tokens are kept, but for another URL: they are not used

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= _iso(time.time())

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "url": self.url,
            "signed_in": self.signed_in,
            "expires_at": self.expires_at,
            "expired": self.expired,
            "scopes": list(self.scopes),
            "refreshable": self.refreshable,
            "other_url": self.other_url,
        }


class TokenStore:
    """The SDK's `TokenStorage` for one server, kept in its token file."""

    def __init__(
        self, server: str, url: str, preregistered: OAuthClientInformationFull | None = None
    ) -> None:
        self.server = server
        self.url = url
        self.path = file_for(server)
        self.preregistered = preregistered  # the config's client: never written to the file

    def __repr__(self) -> str:
        return f"<TokenStore {self.server}>"

    # ---- the SDK's TokenStorage -----------------------------------------------------------------

    async def get_tokens(self) -> OAuthToken | None:
        saved = self._read().get("tokens")
        try:
            tokens = OAuthToken.model_validate(saved) if isinstance(saved, dict) else None
        except ValidationError:
            return None
        if tokens is not None:
            self._hide(tokens)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._hide(tokens)
        now = time.time()
        expires_at = now + tokens.expires_in if tokens.expires_in is not None else None
        self._write(
            tokens=tokens.model_dump(mode="json", exclude_none=True), obtained_at=now, expires_at=expires_at
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.preregistered is not None:
            return self.preregistered
        saved = self._read().get("client")
        try:
            return OAuthClientInformationFull.model_validate(saved) if isinstance(saved, dict) else None
        except ValidationError:
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.preregistered is not None and client_info.client_id == self.preregistered.client_id:
            return  # the config holds it (its secret as a ${VAR})
        if client_info.client_secret:
            redact.register(f"client secret of {self.server}", client_info.client_secret)
        self._write(client=client_info.model_dump(mode="json", exclude_none=True))

    # ---- what the SDK does not keep ---------------------------------------------------------------

    def expires_at(self) -> float | None:
        """When the stored access token expires (epoch seconds), if the server said."""
        value = self._read().get("expires_at")
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    def redirect_port(self) -> int | None:
        """The loopback port of the stored client registration's redirect URI, if any: a client
        registered with one redirect URI keeps using it."""
        client = self._read().get("client")
        uris = client.get("redirect_uris") if isinstance(client, dict) else None
        if not isinstance(uris, list) or not uris or not isinstance(uris[0], str):
            return None
        try:
            port = urlsplit(uris[0]).port
        except ValueError:
            return None
        return port if urlsplit(uris[0]).hostname == "127.0.0.1" else None

    def forget_tokens(self) -> None:
        """Drop the tokens, keep the client registration (a new sign-in reuses it)."""
        data = self._read()
        if data:
            for key in ("tokens", "obtained_at", "expires_at"):
                data.pop(key, None)
            self._replace(data)

    def forget(self) -> bool:
        """Forget everything kept for this server; whether there was anything."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def state(self) -> SignInState:
        data = _load(self.path)
        if data.get("url") not in (None, self.url):
            return SignInState(self.server, self.url, signed_in=False, other_url=True)
        tokens = data.get("tokens") if isinstance(data.get("tokens"), dict) else None
        if not tokens or not isinstance(tokens.get("access_token"), str):
            return SignInState(self.server, self.url, signed_in=False)
        expires_at = self.expires_at()
        scope = tokens.get("scope")
        return SignInState(
            self.server,
            self.url,
            signed_in=True,
            expires_at=None if expires_at is None else _iso(expires_at),
            scopes=tuple(scope.split()) if isinstance(scope, str) else (),
            refreshable=isinstance(tokens.get("refresh_token"), str),
        )

    # ---- the file ---------------------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        """The file's content when it belongs to this URL, else nothing."""
        data = _load(self.path)
        return data if data.get("url") == self.url else {}

    def _write(self, **changes: Any) -> None:
        data = self._read() or {"server": self.server, "url": self.url}
        data.update(changes)
        self._replace(data)

    def _replace(self, data: dict[str, Any]) -> None:
        paths.ensure_private_dir(self.path.parent)
        draft = self.path.with_name(f".{self.path.name}.{os.getpid()}.{time.monotonic_ns()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out, indent=1)
                out.flush()
                os.fsync(out.fileno())
            os.replace(draft, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                draft.unlink()
            raise

    def _hide(self, tokens: OAuthToken) -> None:
        redact.register(f"access token of {self.server}", tokens.access_token)
        if tokens.refresh_token:
            redact.register(f"refresh token of {self.server}", tokens.refresh_token)


def _load(path: Path) -> dict[str, Any]:
    """A token file's JSON object; {} when missing, unreadable, too large or not emceepee's (not a
    regular file: a FIFO put there would block the read)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > FILE_LIMIT:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def holds_tokens(server: str) -> bool:
    """Whether `server`'s token file holds an access token (for whichever URL)."""
    tokens = _load(file_for(server)).get("tokens")
    return isinstance(tokens, dict) and isinstance(tokens.get("access_token"), str)


def stored_servers() -> list[str]:
    """The servers with a token file (by file stem; a digest for an unusual name)."""
    try:
        return sorted(p.stem for p in folder().glob("*.json"))
    except OSError:
        return []
