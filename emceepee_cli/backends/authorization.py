"""A remote backend that refuses emceepee's credentials (HTTP 401 or 403), told apart in one place.

The SDK's Streamable HTTP client fails a request the server answered with 401 or 403 with the
JSON-RPC error "Server returned an error response" (or the error the body holds), which says
nothing of why; its SSE client fails the connection with an HTTP status error (the GET that opens
the stream refused) or drops a refused POST unsaid. `Refusals` watches the connection's HTTP
responses (an httpx response hook, installed by backends/connect.py): a refused POST is kept by
its JSON-RPC id, and the backend's dispatcher (backends/dispatcher.py) fails that request with the
`Unauthorized` it is given (`take`), not the SDK's stand-in. The backend hears of the refusal at
once (`on_refused`): it stops, and is not restarted, for the same credentials would be refused
again (backends/backend.py); it stays failed until its config table changes (a running serve then
restarts it) or serve starts again. A backend that signs in (signin/) is watched through the
sign-in instead (`SignedIn.on_final`: only the final answer, after any sign-in), and there a 403
fails only that request: the account lacks one permission, and the rest still works.

What is said names the challenge's scheme, realm, error and scope (the server's
`WWW-Authenticate`) and the names of the headers emceepee sent, never a header's value: a part of
the challenge that quotes a value sent is left out, and the text goes through `redact`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from http import HTTPStatus

import httpx2
from mcp.shared.dispatcher import coerce_request_id

from emceepee_cli.config import ServerSpec
from emceepee_cli.errors import BackendError
from emceepee_cli.redact import redact

REFUSED = (401, 403)
SAID_PARAMS = ("realm", "error", "scope")  # of a challenge, those worth telling the person
PARAM_CHARS = 80  # of each one quoted: a hostile server's challenge is bounded like anything else
_PARAM = re.compile(r'([A-Za-z_][\w-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)')
_UNSAFE = re.compile(r"[^\x20-\x7e]")  # control characters and the like: never quoted
_CREDENTIAL_HEADERS = ("authorization", "proxy-authorization", "cookie")

RequestId = int | str


class Unauthorized(BackendError):
    """The backend's server refused emceepee's credentials: the request fails with this, and the
    backend stays failed (its `last_error` is this message) until its config changes."""

    def __init__(self, message: str, hint: str, status: int) -> None:
        super().__init__(message, hint=hint)
        self.status = status

    def again(self) -> Unauthorized:
        """The same refusal, for one more caller (an exception raised twice shares its traceback)."""
        return Unauthorized(self.message, self.hint or "", self.status)


class Refusals:
    """One connection's watch on HTTP refusals: what each refused request fails with."""

    def __init__(
        self,
        spec: ServerSpec,
        sent: Mapping[str, str],
        on_refused: Callable[[Unauthorized], None],
        signed_in: bool = False,
    ):
        self.spec = spec  # as the config has it (its `${VAR}` unexpanded): what the hint names
        self.sent = dict(sent)  # the headers as sent (expanded): cut out of what is quoted, never said
        self.on_refused = on_refused
        self.signed_in = signed_in  # emceepee signs in to it (signin/): a refusal comes after the sign-in
        self.refused: dict[RequestId, Unauthorized] = {}

    async def on_response(self, response: httpx2.Response) -> None:
        """httpx's response hook: a POST answered 401 or 403 is a refusal of emceepee's credentials,
        and so is the GET that opens a legacy SSE backend's stream (its connection)."""
        await self._heard(response, self.signed_in)

    async def without_sign_in(self, response: httpx2.Response) -> None:
        """A server that refused and offers no sign-in: its refusal, as if emceepee had not tried."""
        await self._heard(response, signed_in=False)

    async def _heard(self, response: httpx2.Response, signed_in: bool) -> None:
        opening = self.spec.transport == "sse" and response.request.method == "GET"
        if response.status_code not in REFUSED or not (response.request.method == "POST" or opening):
            return
        refusal = unauthorized(
            self.spec,
            response.status_code,
            response.headers.get("www-authenticate", ""),
            self.sent,
            signed_in,
        )
        request_id = _request_id(response.request)
        if request_id is not None:
            self.refused[coerce_request_id(request_id)] = refusal
        if signed_in and response.status_code == 403 and request_id is not None:
            return  # the account may not do this one thing (after a step-up): the rest still works
        self.on_refused(refusal)

    def take(self, request_id: RequestId | None) -> Unauthorized | None:
        """What the request `request_id` fails with, if its server refused it (once)."""
        return None if request_id is None else self.refused.pop(coerce_request_id(request_id), None)


def unauthorized(
    spec: ServerSpec, status: int, challenge: str, sent: Mapping[str, str], signed_in: bool = False
) -> Unauthorized:
    """The refusal said once: what the server answered, and what to set so that it lets emceepee in."""
    reason = HTTPStatus(status).phrase
    said = _challenge(challenge, sent.values())
    if signed_in:
        message = (
            f"Backend '{spec.name}' requires authorization (HTTP {status} {reason}{said}): the server did "
            "not accept emceepee's sign-in."
        )
        hint = (
            f"Sign in again from a terminal: `emceepee auth login {spec.name}` (a running serve starts the "
            "backend again once signed in). "
            + (
                "The server wants more than was granted: the account you sign in with needs that permission."
                if status == 403
                else "If the server takes no OAuth sign-in, give it a token in a header instead "
                "(`emceepee servers add --help`)."
            )
        )
        return Unauthorized(redact(message), redact(hint), status)
    names = [name for name in sent if name.lower() in _CREDENTIAL_HEADERS] or list(sent)
    told = (
        f"emceepee sent the header(s) {', '.join(names)} (values not shown) and the server did not "
        "accept them"
        if names
        else "emceepee sent no credentials"
    )
    message = f"Backend '{spec.name}' requires authorization (HTTP {status} {reason}{said}): {told}."
    return Unauthorized(redact(message), redact(_hint(spec, status, bool(names), challenge)), status)


def _hint(spec: ServerSpec, status: int, sent: bool, challenge: str) -> str:
    var = re.sub(r"\W", "_", spec.name).upper() + "_TOKEN"
    header = f'headers = {{ Authorization = "Bearer ${{{var}}}" }}'
    url = spec.url if spec.url and "?" not in spec.url else "<its url>"
    command = f"emceepee servers add {spec.name} --url '{url}' -H 'Authorization=Bearer ${{{var}}}' --replace"
    if not sent:
        fix = (
            "Give it a token in a header, kept in an environment variable: "
            f"{header} in [servers.{spec.name}] of the config, or {command}; then set {var} where serve "
            "runs (the env of emceepee's entry in your MCP host's config)."
        )
    elif status == 403:
        fix = (
            "The token is not allowed this (a missing scope or permission): use one that is, in the "
            f"server's headers ({header}, its value from an environment variable)."
        )
    else:
        fix = (
            "Check the token: is the variable its header names set where serve runs (the env of "
            "emceepee's entry in your MCP host's config), and is the token still valid for this server? "
            f"The header as the config should hold it: {header}."
        )
    oauth = (
        " The server offers OAuth sign-in: without the Authorization header in its config, emceepee signs "
        f"in through your browser (`emceepee auth login {spec.name}`)."
        if "resource_metadata" in challenge
        else ""
    )
    return (
        f"{fix}{oauth} emceepee does not retry it: a running serve starts it again when its table in "
        "the config changes (or when your MCP host restarts emceepee); `emceepee doctor` checks it."
    )


def _challenge(header: str, secrets: Iterable[str]) -> str:
    """`; Bearer realm="x", error="invalid_token"` from a `WWW-Authenticate` header, or ``."""
    scheme = header.strip().split(" ", 1)[0] if header.strip() else ""
    if not re.fullmatch(r"[A-Za-z][\w.+-]{0,30}", scheme):
        return ""
    # A value sent, or its credential after a scheme ("Bearer <token>"), is never quoted back.
    cut = [value for secret in secrets for value in (secret, secret.split(" ", 1)[-1]) if len(value) >= 4]
    params = []
    for name, raw in _PARAM.findall(header):
        value = re.sub(r"\\(.)", r"\1", raw[1:-1]) if raw.startswith('"') else raw  # a quoted-string
        if not value or name.lower() not in SAID_PARAMS or any(secret in value for secret in cut):
            continue
        value = _UNSAFE.sub("?", value)[:PARAM_CHARS].replace('"', "'")
        params.append(f'{name.lower()}="{value}"')
    return "; " + " ".join([scheme, ", ".join(params)]).strip()


def _request_id(request: httpx2.Request) -> RequestId | None:
    """The JSON-RPC id of a POST's body, if it is a request (a notification has none)."""
    try:
        message = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):  # a streamed body, or not JSON: no request of ours
        return None
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, int | str) and not isinstance(found, bool) else None
