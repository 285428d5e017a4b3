"""Signing in to one remote backend with the MCP SDK's OAuth client (`mcp.client.auth`).

The SDK's `OAuthClientProvider` does what the spec asks of a client: on 401 it discovers the
protected resource metadata (from `WWW-Authenticate`, then the well-known paths, with the
2025-03-26 fallbacks) and the authorization server's; registers (a pre-registered client from the
config, a Client ID Metadata Document where the server takes one, else dynamic registration);
runs the authorization code grant with PKCE and the `resource` parameter; picks scopes (the
challenge's, else `scopes_supported`, else none; `offline_access` when offered); steps up on a 403
`insufficient_scope`; refreshes. emceepee gives it what it cannot know:

- where tokens are kept (`store.TokenStore`: one 0600 file per server, never the config or journal);
- a `Person` who is shown the authorization URL (a terminal prints it; serve opens the browser,
  signin/browser.py, and parks a URL question, forwarded to a host that takes URL elicitation)
  and the loopback listener the redirect lands on (`loopback.Loopback`), bound for that sign-in
  only;
- a refresh a minute before the access token expires, also after a restart (the SDK knows an
  expiry only for tokens it obtained itself; the adapter is `_expire_early`).

`SignedIn` is the httpx2 auth a remote backend's connection uses. `on_final` hears each request's
last response, after any sign-in: a 401 or 403 there is the server refusing for good
(backends/authorization.py), not the challenge that starts a sign-in.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Protocol, cast
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    TokenEndpointAuthMethod,
)

from emceepee_cli.config import ServerSpec
from emceepee_cli.redact import redact
from emceepee_cli.signin import loopback
from emceepee_cli.signin.loopback import SignInError
from emceepee_cli.signin.store import TokenStore

SIGNIN_WINDOW_S = 600.0  # how long a sign-in waits for the person before it gives up
REFRESH_MARGIN_S = 60.0  # refresh this long before the access token expires
AUTHORIZATION_URL_LIMIT = 8192
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class Person(Protocol):
    """Whoever signs in: shown the authorization URL, and able to decline."""

    async def show(self, server: str, url: str) -> None:
        """Give the person the authorization URL (the redirect listener is already bound)."""

    async def declined(self, server: str) -> str:
        """Return, with why, if the person declines this sign-in; otherwise never return."""

    async def done(self, server: str, signed_in: bool) -> None:
        """The sign-in ended (signed in, or not)."""


def signs_in(spec: ServerSpec) -> bool:
    """Whether `spec` signs in when its server asks: a remote backend without a static
    Authorization header (a person who set one chose that token)."""
    return spec.url is not None and not any(name.lower() == "authorization" for name in spec.headers)


def store_for(spec: ServerSpec) -> TokenStore:
    assert spec.url is not None
    return TokenStore(spec.name, spec.url, preregistered=_preregistered(spec))


def auth_for(spec: ServerSpec, person: Person, *, window_s: float = SIGNIN_WINDOW_S) -> SignedIn | None:
    """The sign-in of the expanded `spec`'s connection, or None when it does not sign in."""
    if not signs_in(spec):
        return None
    assert spec.url is not None
    store = store_for(spec)
    handlers = Handlers(spec.name, person, window_s)
    oauth = spec.oauth
    port = (oauth.redirect_port if oauth else None) or store.redirect_port() or loopback.free_port()
    metadata = OAuthClientMetadata(
        client_name="emceepee",
        redirect_uris=[loopback.redirect_uri(port)],  # type: ignore[list-item]  # pydantic parses it
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method=_auth_method(spec),
    )
    provider = OAuthClientProvider(
        server_url=spec.url,
        client_metadata=metadata,
        storage=store,
        redirect_handler=handlers.redirect,
        callback_handler=handlers.callback,
        client_metadata_url=oauth.client_metadata_url if oauth else None,
    )
    return SignedIn(spec.name, provider, store)


class Patience:
    """The time limits of a connection's start that a person's sign-in does not count against (the
    handshake's, an SSE stream's opening): paused while the person is asked, given their whole
    length again after."""

    def __init__(self) -> None:
        self._limits: dict[anyio.CancelScope, float] = {}
        self.paused = False

    def __repr__(self) -> str:
        return f"<Patience limits={len(self._limits)} paused={self.paused}>"

    def watch(self, scope: anyio.CancelScope, seconds: float) -> None:
        self._limits[scope] = seconds
        if self.paused:
            scope.deadline = math.inf

    def forget(self, scope: anyio.CancelScope) -> None:
        self._limits.pop(scope, None)

    def pause(self) -> None:
        self.paused = True
        for scope in self._limits:
            scope.deadline = math.inf

    def resume(self) -> None:
        self.paused = False
        for scope, seconds in self._limits.items():
            scope.deadline = anyio.current_time() + seconds


def check_authorization_url(server: str, url: str) -> None:
    """An authorization URL a person may be sent to: https (plain http only on this machine, as
    OAuth 2.1 allows for loopback), and of a sane length. What the server's metadata names is
    untrusted: no other scheme is opened in the browser or shown as a link."""
    parts = urlsplit(url)
    local = parts.hostname in LOOPBACK_HOSTS
    if len(url) > AUTHORIZATION_URL_LIMIT or not (
        parts.scheme == "https" or (parts.scheme == "http" and local)
    ):
        shown = url[:80] + ("…" if len(url) > 80 else "")
        raise SignInError(
            f"The sign-in to '{server}' would send you to {shown!r}, which emceepee does not open: an "
            "authorization server must be reached over https (plain http only on this machine) with a "
            f"URL under {AUTHORIZATION_URL_LIMIT} characters.",
            hint="Check the server's url in the config: its authorization server is misconfigured, "
            "or hostile.",
        )


class Handlers:
    """The SDK's redirect and callback handlers for one server's sign-ins."""

    def __init__(self, server: str, person: Person, window_s: float) -> None:
        self.server = server
        self.person = person
        self.window_s = window_s
        self._listening: loopback.Loopback | None = None

    async def redirect(self, url: str) -> None:
        check_authorization_url(self.server, url)
        if self._listening is not None:
            await self._listening.close()
        self._listening = await loopback.Loopback.open(self.server, url)
        try:
            await self.person.show(self.server, url)
        except BaseException:
            await self._stop_listening()
            raise

    async def callback(self) -> AuthorizationCodeResult:
        listening = self._listening
        if listening is None:
            raise SignInError(f"The sign-in to '{self.server}' was not started.")
        signed_in = False
        try:
            result = await self._first(listening)
            signed_in = True
            return result
        finally:
            await self._stop_listening()
            with anyio.CancelScope(shield=True):
                await self.person.done(self.server, signed_in)

    async def _first(self, listening: loopback.Loopback) -> AuthorizationCodeResult:
        """The redirect, unless the person declines or the window closes first."""
        outcome: list[AuthorizationCodeResult | SignInError] = []

        async def redirected() -> None:
            try:
                outcome.append(await listening.result())
            except SignInError as exc:
                outcome.append(exc)
            tg.cancel_scope.cancel()

        async def declined() -> None:
            why = await self.person.declined(self.server)
            outcome.append(
                SignInError(
                    f"The sign-in to '{self.server}' ended without signing in: {why}.",
                    hint=f"Run `emceepee auth login {self.server}` to sign in from a terminal.",
                )
            )
            tg.cancel_scope.cancel()

        with anyio.move_on_after(self.window_s):
            async with anyio.create_task_group() as tg:
                tg.start_soon(redirected)
                tg.start_soon(declined)
        if not outcome:
            raise SignInError(
                f"Nobody finished signing in to '{self.server}' within {self.window_s / 60:g} minutes.",
                hint=f"Run `emceepee auth login {self.server}` to sign in from a terminal.",
            )
        if isinstance(outcome[0], SignInError):
            raise outcome[0]
        return outcome[0]

    async def _stop_listening(self) -> None:
        listening, self._listening = self._listening, None
        if listening is not None:
            await listening.close()


class SignedIn(httpx2.Auth):
    """A remote backend's sign-in as the SDK does it, with a refresh before expiry and a hook on
    each request's final response."""

    requires_request_body = True
    requires_response_body = True

    def __init__(self, server: str, provider: OAuthClientProvider, store: TokenStore) -> None:
        self.server = server
        self.provider = provider
        self.store = store
        self.on_final: Callable[[httpx2.Response], Awaitable[None]] | None = None
        self.on_failed: Callable[[str], None] | None = None  # a sign-in ended without tokens: why
        # The server refused and published nothing to sign in with: its challenge, as a refusal.
        self.on_no_sign_in: Callable[[httpx2.Response], Awaitable[None]] | None = None
        _expire_early(provider, store.expires_at())

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        _refresh_due(self.provider)
        flow = self.provider.async_auth_flow(request)
        challenge: httpx2.Response | None = None  # the server's answer to the request itself
        published = False  # the server answered some request of the sign-in's own
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if outgoing is request and response.status_code in (401, 403):
                    challenge = response
                elif outgoing is not request and response.is_success:
                    published = True  # metadata or a registration: the server does sign-in
                try:
                    outgoing = await flow.asend(response)
                except StopAsyncIteration:
                    if self.on_final is not None:
                        await self.on_final(response)
                    return
        except SignInError as exc:
            self._failed(exc.message)
            raise
        except (OAuthFlowError, ValueError) as exc:  # the SDK's flow, or a server's malformed answer
            if challenge is not None and self.on_no_sign_in is not None and not published:
                await self.on_no_sign_in(challenge)  # a plain refusal: there was nothing to sign in to
            else:
                self._failed(f"Signing in to '{self.server}' failed: {redact(str(exc))[:500]}")
            raise
        finally:
            await flow.aclose()

    def _failed(self, message: str) -> None:
        if self.on_failed is not None:
            self.on_failed(message)


# ---- the adapter: the SDK's OAuthContext fields emceepee sets (mcp>=2.3,<2.4) -----------------------


def _expire_early(provider: OAuthClientProvider, expires_at: float | None) -> None:
    """Tell the SDK when tokens it loads from storage expire: it knows only of tokens it obtained."""
    if expires_at is not None:
        provider.context.token_expiry_time = expires_at


def _refresh_due(provider: OAuthClientProvider) -> None:
    """Within `REFRESH_MARGIN_S` of expiry, with a refresh token at hand: refresh now, not after."""
    context = provider.context
    expiry = context.token_expiry_time
    if expiry is not None and expiry - time.time() < REFRESH_MARGIN_S and context.can_refresh_token():
        context.token_expiry_time = min(expiry, time.time() - 1)


# ---- the config's client ---------------------------------------------------------------------


def _preregistered(spec: ServerSpec) -> OAuthClientInformationFull | None:
    oauth = spec.oauth
    if oauth is None or not oauth.client_id:
        return None
    port = oauth.redirect_port or 0
    return OAuthClientInformationFull(
        client_id=oauth.client_id,
        client_secret=oauth.client_secret or None,
        token_endpoint_auth_method=_auth_method(spec),
        redirect_uris=[loopback.redirect_uri(port)] if port else None,  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
    )


def _auth_method(spec: ServerSpec) -> TokenEndpointAuthMethod | None:
    """How a pre-registered client authenticates at the token endpoint: as the config says, else
    with its secret (basic) when it has one, else none. A registered client's is the server's."""
    oauth = spec.oauth
    if oauth is None or not oauth.client_id:
        return None
    if oauth.token_endpoint_auth_method:
        return cast("TokenEndpointAuthMethod", oauth.token_endpoint_auth_method)  # checked by the config
    return "client_secret_basic" if oauth.client_secret else "none"


def authorization_target(url: str) -> str:
    """The host an authorization URL leads to (what the person is told they will sign in at)."""
    return urlsplit(url).netloc or url


class Nobody:
    """No person to ask (`doctor`): a server that wants a sign-in is reported, not signed in to."""

    async def show(self, server: str, url: str) -> None:
        raise SignInError(
            f"Backend '{server}' needs you to sign in to its server.",
            hint=f"Run `emceepee auth login {server}`.",
        )

    async def declined(self, server: str) -> str:
        await anyio.sleep_forever()
        return ""

    async def done(self, server: str, signed_in: bool) -> None:
        return None
