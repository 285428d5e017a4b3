"""An MCP backend that needs OAuth 2.1 sign-in, with its own authorization server: prints its port,
then serves on 127.0.0.1 (logs on stderr).

MCP (tools `echo`, and `whoami`: the scopes of the call's token, never the token) at `/mcp`, and
with `--sse` the legacy transport at `/sse` + `/messages/`. Without a live bearer token for that
resource, a request gets 401 and `WWW-Authenticate: Bearer resource_metadata="<base>/.well-known/
oauth-protected-resource/mcp"` (`.../sse` for the SSE paths; `, scope="..."` with --challenge-scope;
`, error="invalid_token"` when a token was sent). With --step-up SCOPE, `tools/call whoami` gets 403
`Bearer error="insufficient_scope", scope="SCOPE <the token's scopes>", resource_metadata=...`.

The authorization server: `/.well-known/oauth-authorization-server` (RFC 8414), `/register` (RFC
7591; not with --no-dcr), `/authorize` (no person: redirects at once with code and state, or
error=access_denied with --deny), `/token` (authorization_code with PKCE S256, checking verifier,
code reuse, redirect_uri and `resource`; refresh_token, rotating the refresh token). A registered
client authenticates as it registered (client_secret_basic by default); a --pre-registered ID:SECRET
client with basic or post (`ID:`: a public client). --token-ttl is only the expires_in told: a token
ends after --revoke-after N MCP POSTs instead, so tests of expiry never wait on the clock.

`GET /log`: each register, authorize and token request's parameters (secrets, verifiers, codes and
tokens as "<set>"; `auth_method` for token requests). `GET /counts`: requests per `"<path> <method>"`
(the JSON-RPC method, else the HTTP one) and `"refused <status>"`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import logging
import secrets
import socket
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlencode, urlparse

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.sse import SseServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the repo's root
from tests.backends.asgi import read_body, replay

METHODS = ("client_secret_basic", "client_secret_post", "none")
HIDDEN = {"code", "code_verifier", "password"}  # and any *secret*, *assertion* or *token
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
TOOLS = [
    types.Tool(name="echo", description="Echoes its text.", input_schema={"type": "object"}),
    types.Tool(
        name="whoami", description="The scopes of this call's token.", input_schema={"type": "object"}
    ),
]


@dataclass(frozen=True)
class Client:
    client_id: str
    secret: str | None
    methods: frozenset[str]  # the token endpoint authentications this client may use
    redirect_uris: tuple[str, ...] | None  # None: any loopback URI (a pre-registered client)


@dataclass(frozen=True)
class Grant:
    client_id: str
    scopes: tuple[str, ...]
    resource: str | None


@dataclass(frozen=True)
class Code:
    grant: Grant
    redirect_uri: str
    challenge: str


@dataclass
class Access:
    grant: Grant
    requests: int = 0  # MCP POSTs made with this token, for --revoke-after


class OAuthError(Exception):
    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error, self.description, self.status = error, description, status

    def response(self) -> JSONResponse:
        body = {"error": self.error, "error_description": self.description}
        return JSONResponse(body, self.status, headers={"cache-control": "no-store"})


@dataclass
class Authority:
    """The authorization server's state, and its endpoints (starlette request → response)."""

    options: argparse.Namespace
    base: str
    clients: dict[str, Client] = field(default_factory=dict)
    codes: dict[str, Code] = field(default_factory=dict)
    tokens: dict[str, Access] = field(default_factory=dict)
    refreshes: dict[str, Grant] = field(default_factory=dict)
    log: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for pair in self.options.pre_registered:
            client_id, _, secret = pair.partition(":")
            methods = frozenset(METHODS[:2] if secret else METHODS[2:])
            self.clients[client_id] = Client(client_id, secret or None, methods, None)

    def resource_of(self, path: str) -> str:
        """The protected resource a request path belongs to."""
        return f"{self.base}/mcp" if path == "/mcp" else f"{self.base}/sse"

    def resources(self) -> set[str]:
        return {self.resource_of("/mcp")} | ({self.resource_of("/sse")} if self.options.sse else set())

    def scopes_supported(self) -> dict[str, list[str]]:
        supported = self.options.scopes_supported
        return {"scopes_supported": supported.split()} if supported is not None else {}

    def note(self, endpoint: str, params: dict[str, Any], **extra: str) -> None:
        self.log.append(
            {"endpoint": endpoint, "params": {k: _shown(k, v) for k, v in params.items()}, **extra}
        )

    async def protected_resource(self, request: Request) -> JSONResponse:
        resource = f"{self.base}/{request.path_params['name']}"
        if resource not in self.resources():
            return JSONResponse({"error": "not_found"}, 404)
        body = {
            "resource": self.options.claim_resource or resource,
            "authorization_servers": [self.base],
            "bearer_methods_supported": ["header"],
        }
        return JSONResponse(body | self.scopes_supported())

    async def metadata(self, request: Request) -> JSONResponse:
        body: dict[str, Any] = {
            "issuer": self.base,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": f"{self.base}/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": list(METHODS),
        }
        if not self.options.no_dcr:
            body["registration_endpoint"] = f"{self.base}/register"
        return JSONResponse(body | self.scopes_supported())

    async def register(self, request: Request) -> Response:
        try:
            asked = await request.json()
        except ValueError:
            asked = None
        if not isinstance(asked, dict):
            return OAuthError("invalid_client_metadata", "the body is not a JSON object").response()
        self.note("register", asked)
        uris = asked.get("redirect_uris")
        method = asked.get("token_endpoint_auth_method") or "client_secret_basic"
        if not isinstance(uris, list) or not uris or not all(isinstance(u, str) for u in uris):
            return OAuthError("invalid_redirect_uri", "redirect_uris must be a list of URIs").response()
        if method not in METHODS:
            return OAuthError("invalid_client_metadata", f"unsupported auth method {method}").response()
        secret = None if method == "none" else secrets.token_urlsafe(24)
        client = Client(f"client-{secrets.token_hex(6)}", secret, frozenset([method]), tuple(uris))
        self.clients[client.client_id] = client
        answer = asked | {"client_id": client.client_id, "token_endpoint_auth_method": method}
        answer |= {"client_secret": secret} if secret else {}
        return JSONResponse(answer, 201)

    async def authorize(self, request: Request) -> Response:
        asked = dict(request.query_params)
        self.note("authorize", asked)
        client = self.clients.get(asked.get("client_id", ""))
        redirect_uri = asked.get("redirect_uri", "")
        if client is None or not _redirect_allowed(client, redirect_uri):
            return OAuthError("invalid_request", "unknown client_id or redirect_uri").response()
        answer = {"state": asked["state"]} if "state" in asked else {}
        try:
            code = self.code_for(client, asked)
        except OAuthError as refusal:
            answer |= {"error": refusal.error, "error_description": refusal.description}
        else:
            answer |= {"code": code}
        joint = "&" if "?" in redirect_uri else "?"
        return RedirectResponse(f"{redirect_uri}{joint}{urlencode(answer)}", 302)

    def code_for(self, client: Client, asked: dict[str, str]) -> str:
        if asked.get("response_type") != "code":
            raise OAuthError("unsupported_response_type", "only response_type=code")
        if asked.get("code_challenge_method") != "S256" or not asked.get("code_challenge"):
            raise OAuthError("invalid_request", "PKCE with code_challenge_method=S256 is required")
        resource = asked.get("resource")
        if resource is not None and resource not in self.resources():
            raise OAuthError("invalid_target", f"unknown resource {resource}")
        if self.options.deny:
            raise OAuthError("access_denied", "the person said no")
        code = secrets.token_urlsafe(24)
        withheld = self.options.withhold
        granted = tuple(scope for scope in asked.get("scope", "").split() if scope != withheld)
        grant = Grant(client.client_id, granted, resource)
        self.codes[code] = Code(grant, asked["redirect_uri"], asked["code_challenge"])
        return code

    async def token(self, request: Request) -> Response:
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        method, client_id, secret = _credentials(request, form)
        self.note("token", form, auth_method=method)
        try:
            client = self.authenticate(method, client_id, secret)
            grant = self.grant_for(client, form)
        except OAuthError as refusal:
            return refusal.response()
        return JSONResponse(self.issue(grant), headers={"cache-control": "no-store"})

    def grant_for(self, client: Client, form: dict[str, str]) -> Grant:
        kind = form.get("grant_type")
        if kind == "authorization_code":
            return self.redeem(client, form)
        if kind == "refresh_token":
            return self.refresh(client, form)
        raise OAuthError("unsupported_grant_type", f"grant_type {kind}")

    def authenticate(self, method: str, client_id: str, secret: str | None) -> Client:
        client = self.clients.get(client_id)
        if client is None or method not in client.methods:
            raise OAuthError("invalid_client", f"client {client_id!r} may not use {method}", 401)
        if method != "none" and not secrets.compare_digest(secret or "", client.secret or ""):
            raise OAuthError("invalid_client", "wrong client secret", 401)
        return client

    def redeem(self, client: Client, form: dict[str, str]) -> Grant:
        code = self.codes.pop(form.get("code", ""), None)  # a code is good once
        if code is None or code.grant.client_id != client.client_id:
            raise OAuthError("invalid_grant", "unknown, used or another client's code")
        if form.get("redirect_uri") != code.redirect_uri:
            raise OAuthError("invalid_grant", "redirect_uri differs from the authorization request's")
        verifier = form.get("code_verifier", "").encode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).decode().rstrip("=")
        if not secrets.compare_digest(challenge, code.challenge):
            raise OAuthError("invalid_grant", "code_verifier does not match the code_challenge")
        return replace(code.grant, resource=self.target(form, code.grant.resource))

    def refresh(self, client: Client, form: dict[str, str]) -> Grant:
        grant = self.refreshes.pop(form.get("refresh_token", ""), None)  # rotated: good once
        if grant is None or grant.client_id != client.client_id or self.options.refuse_refresh:
            raise OAuthError("invalid_grant", "unknown, used or refused refresh token")
        scopes = tuple(form["scope"].split()) if "scope" in form else grant.scopes
        if not set(scopes) <= set(grant.scopes):
            raise OAuthError("invalid_scope", "a refresh cannot widen the grant")
        return replace(grant, scopes=scopes, resource=self.target(form, grant.resource))

    def target(self, form: dict[str, str], granted: str | None) -> str | None:
        """The `resource` of a token request: a known one, and the one authorized if any was."""
        resource = form.get("resource", granted)
        if resource is not None and (resource not in self.resources() or granted not in (None, resource)):
            raise OAuthError("invalid_target", f"resource {resource} was not authorized")
        return resource

    def issue(self, grant: Grant) -> dict[str, Any]:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.tokens[access] = Access(grant)
        self.refreshes[refresh] = grant
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.options.token_ttl,
            "scope": " ".join(grant.scopes),
            "refresh_token": refresh,
        }

    def access(self, authorization: str, path: str) -> Access | None:
        """The live token an Authorization header carries for this path's resource, if any."""
        scheme, _, token = authorization.partition(" ")
        access = self.tokens.get(token) if scheme.lower() == "bearer" else None
        if access is None or access.grant.resource not in (None, self.resource_of(path)):
            return None
        limit = self.options.revoke_after
        return None if limit is not None and access.requests >= limit else access


def _shown(key: str, value: Any) -> Any:
    """A logged parameter: its value, or "<set>" for a secret."""
    secret = key in HIDDEN or "secret" in key or "assertion" in key or key.endswith("token")
    return "<set>" if secret else value


def _redirect_allowed(client: Client, uri: str) -> bool:
    if client.redirect_uris is not None:
        return uri in client.redirect_uris
    parsed = urlparse(uri)
    return parsed.scheme == "http" and (parsed.hostname or "") in LOOPBACK


def _credentials(request: Request, form: dict[str, str]) -> tuple[str, str, str | None]:
    """How the client authenticated at the token endpoint: (method, client_id, secret)."""
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "basic":
        try:
            client_id, _, secret = base64.b64decode(value).decode().partition(":")
        except ValueError:
            client_id, secret = "", ""
        return "client_secret_basic", unquote(client_id), unquote(secret)
    if "client_secret" in form:
        return "client_secret_post", form.get("client_id", ""), form["client_secret"]
    return "none", form.get("client_id", ""), None


class Guard:
    """The ASGI app in front of everything: counts requests, and lets an MCP request through only
    with a live token (and, for `whoami` with --step-up, the scope it needs)."""

    def __init__(self, inner: ASGIApp, authority: Authority) -> None:
        self.inner, self.authority, self.options = inner, authority, authority.options
        self.counts: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)  # the lifespan of the MCP session manager
            return
        path = scope["path"]
        if path == "/counts":
            await JSONResponse(self.counts)(scope, receive, send)
            return
        body = await read_body(receive) if scope["method"] == "POST" else b""
        message = _message(body) if path in ("/mcp", "/messages/") else {}
        self.counts[f"{path} {message.get('method') or scope['method']}"] += 1
        if path in ("/mcp", "/sse", "/messages/"):
            refusal = self.refusal(path, scope, message)
            if refusal is not None:
                self.counts[f"refused {refusal.status_code}"] += 1
                await refusal(scope, receive, send)
                return
        await self.inner(scope, replay(body, receive), send)

    def refusal(self, path: str, scope: Scope, message: dict[str, Any]) -> Response | None:
        sent = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        access = self.authority.access(sent, path)
        resource = urlparse(self.authority.resource_of(path)).path
        where = f'resource_metadata="{self.authority.base}/.well-known/oauth-protected-resource{resource}"'
        if access is None:
            scope_hint = f', scope="{self.options.challenge_scope}"' if self.options.challenge_scope else ""
            error = ', error="invalid_token"' if sent else ""
            body = {"error": "invalid_token", "error_description": "sign in first"}
            return JSONResponse(body, 401, headers={"www-authenticate": f"Bearer {where}{scope_hint}{error}"})
        if scope["method"] == "POST":
            access.requests += 1
        needed = self.options.step_up
        params = message.get("params") or {}
        if needed in access.grant.scopes or message.get("method") != "tools/call":
            return None
        if needed is None or not isinstance(params, dict) or params.get("name") != "whoami":
            return None
        wanted = " ".join(dict.fromkeys((needed, *access.grant.scopes)))
        challenge = f'Bearer error="insufficient_scope", scope="{wanted}", {where}'
        body = {"error": "insufficient_scope", "error_description": f"{needed} is needed"}
        return JSONResponse(body, 403, headers={"www-authenticate": challenge})


def _message(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


def mcp_server(authority: Authority) -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(
        ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        text = str((params.arguments or {}).get("text", ""))
        if params.name == "whoami":
            sent = ctx.request.headers.get("authorization", "") if isinstance(ctx.request, Request) else ""
            access = authority.tokens.get(sent.partition(" ")[2])  # the guard let only a live one in
            text = " ".join(access.grant.scopes) if access else ""
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])

    return Server("signin", on_list_tools=list_tools, on_call_tool=call_tool)


class Endpoint:
    """An ASGI app as a starlette Route's endpoint (a function there is taken as request → response)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


def sse_routes(server: Server[Any]) -> list[Route]:
    """The legacy HTTP+SSE transport: the event stream at /sse, the client's messages at /messages/."""
    hosts = ["127.0.0.1:*", "localhost:*"]
    security = TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=[f"http://{h}" for h in hosts])
    transport = SseServerTransport("/messages/", security_settings=security)

    async def stream(scope: Scope, receive: Receive, send: Send) -> None:
        async with transport.connect_sse(scope, receive, send) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    return [
        Route("/sse", Endpoint(stream), methods=["GET"]),
        Route("/messages/", Endpoint(transport.handle_post_message), methods=["POST"]),
    ]


def build(options: argparse.Namespace, base: str) -> Guard:
    authority = Authority(options, base)
    server = mcp_server(authority)
    routes = [
        Route("/.well-known/oauth-protected-resource/{name}", authority.protected_resource),
        Route("/.well-known/oauth-authorization-server", authority.metadata),
        Route("/authorize", authority.authorize),
        Route("/token", authority.token, methods=["POST"]),
        Route("/log", lambda request: JSONResponse(authority.log)),
    ]
    routes += [] if options.no_dcr else [Route("/register", authority.register, methods=["POST"])]
    routes += sse_routes(server) if options.sse else []
    return Guard(server.streamable_http_app(custom_starlette_routes=routes), authority)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sse", action="store_true", help="also serve the legacy SSE transport")
    parser.add_argument("--challenge-scope", default=None, help="scope= in the 401 challenge")
    parser.add_argument("--no-dcr", action="store_true", help="no dynamic client registration")
    parser.add_argument("--deny", action="store_true", help="/authorize answers error=access_denied")
    parser.add_argument("--pre-registered", action="append", default=[], metavar="ID:SECRET")
    parser.add_argument(
        "--token-ttl", type=int, default=3600, metavar="SECONDS", help="expires_in, told only"
    )
    parser.add_argument("--refuse-refresh", action="store_true", help="refresh grants get invalid_grant")
    parser.add_argument("--step-up", default=None, metavar="SCOPE", help="whoami needs this scope")
    parser.add_argument("--scopes-supported", default=None, help='e.g. "a b offline_access"')
    parser.add_argument("--withhold", default=None, metavar="SCOPE", help="never granted, even if asked")
    parser.add_argument("--claim-resource", default=None, metavar="URL", help="the metadata's resource")
    parser.add_argument("--revoke-after", type=int, default=None, metavar="N", help="MCP POSTs per token")
    return parser.parse_args(argv)


async def main() -> None:
    options = parse()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    print(port, flush=True)
    app = build(options, f"http://127.0.0.1:{port}")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    assert isinstance(sys.stdout, io.TextIOWrapper)  # a script's stdout; the port line must not wait
    sys.stdout.reconfigure(line_buffering=True)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    anyio.run(main)
