"""A 2026-07-28 host's roots, asked in an input round of its own tool call.

Such a host takes no `roots/list` from a server, so its roots reach backends only through a round.
When its `tools/call` (execute_tool, or a backend tool by its direct name) declares `roots`, the
host's roots are not known yet (or it said they changed), and some backend would be answered with
them (one with no `roots` of its own: session/roots.py), the first reply is a round asking only
the roots. Its `request_state` is sealed under the install key (seal.py) and names the call
(server, tool, arguments), this serve, a nonce and an expiry; nothing is kept until the host comes
back, so a host that never retries leaves nothing behind. On the retry the state is checked
(altered, another call's, another serve's, expired, or used before: each refused saying what to
do), then the answer (one `ListRootsResult`, under the key asked), then the roots are kept as a
handshake-era host's fetched ones are, and the call runs as any other (it may bring rounds of its
own questions). Backends that ask their roots mid-call are answered from what is kept.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from typing import Any

import mcp_types as types
import pydantic
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult

from emceepee_cli import seal
from emceepee_cli.calls.call import InputRound
from emceepee_cli.calls.host_rounds import HostRetry
from emceepee_cli.errors import UsageError
from emceepee_cli.session.roots import Roots

PREFIX = "emo1."  # tells a roots round's state from a question round's ("emr1.") at a glance
KEY = "roots"  # the round's one input request
TTL_S = 600.0  # a host answers its roots at once; past this it calls again, and is asked again
ROUND_TASK = ""  # a roots round belongs to no task: the call has not started


class RootsRound:
    def __init__(self, roots: Roots, install_key: bytes, instance_id: str) -> None:
        self.roots = roots
        self.install_key = install_key
        self.instance_id = instance_id
        self.used: dict[str, float] = {}  # nonce -> expiry, of the states already answered

    def __repr__(self) -> str:
        return f"<RootsRound used={len(self.used)}>"

    def offer(
        self, server: str, tool: str, args: dict[str, Any] | None, asks: types.ClientCapabilities
    ) -> InputRound | None:
        """The round asking the host's roots first, when this request declares `roots` and they are
        wanted; None otherwise (the call runs at once)."""
        if asks.roots is None or not self.roots.wants_host_roots():
            return None
        claims = {
            "p": "roots",
            "c": seal.call_digest(server, tool, args),
            "i": self.instance_id,
            "n": secrets.token_urlsafe(12),
            "exp": int(time.time() + TTL_S),
        }
        requests: types.InputRequests = {KEY: types.ListRootsRequest()}
        return InputRound(ROUND_TASK, requests, seal.seal(self.install_key, claims, PREFIX))

    @staticmethod
    def answers(retry: HostRetry) -> bool:
        """Whether this retry answers a roots round (its state is one), not a question round."""
        return retry.state is not None and retry.state.strip().startswith(PREFIX)

    def take(self, retry: HostRetry, server: str, tool: str, args: dict[str, Any] | None) -> None:
        """Check a retry that answers a roots round and keep the host's roots; a UsageError says what
        is wrong and what to do (nothing is kept then)."""
        assert retry.state is not None
        claims = self._verify(retry.state, server, tool, args)
        roots = checked_roots(retry.responses or {})
        now = time.time()
        self.used = {nonce: exp for nonce, exp in self.used.items() if exp >= now}
        nonce = str(claims["n"])
        if nonce in self.used:
            raise UsageError(
                "This request_state (the host's roots) was already answered; a request_state is used once.",
                hint="Call the tool again without request_state and input_responses.",
            )
        self.used[nonce] = float(claims["exp"])
        self.roots.from_host_round(roots)

    def _verify(self, state: str, server: str, tool: str, args: dict[str, Any] | None) -> dict[str, Any]:
        """The claims of a roots round's state that this serve issued for this very call, unexpired."""
        start_over = "Call the tool again without request_state and input_responses."
        claims = seal.unseal(self.install_key, state.strip(), PREFIX)
        if claims is None or claims.get("p") != "roots" or not isinstance(claims.get("n"), str):
            raise UsageError(
                "This request_state was not issued by this emceepee, or was altered.", start_over
            )
        if claims["exp"] < time.time():
            raise UsageError("This request_state (the host's roots) has expired.", start_over)
        if claims.get("i") != self.instance_id:
            raise UsageError(
                "This request_state (the host's roots) was issued by another emceepee process: this one "
                "started since, or serves another host.",
                start_over,
            )
        if claims.get("c") != seal.call_digest(server, tool, args):
            raise UsageError(
                f"This request_state (the host's roots) belongs to another call, not to {server}.{tool} "
                "with these arguments.",
                "Send a round's answers with the same tool and arguments as the call it came from.",
            )
        return claims


def checked_roots(responses: types.InputResponses) -> list[types.Root]:
    """The roots in a roots round's answers; a UsageError when they are not one `ListRootsResult`
    under the key asked."""
    others = [key for key in responses if key != KEY]
    if others:
        raise UsageError(
            f"input_responses has '{others[0][:80]}', which this round did not ask (it asked '{KEY}'). "
            "Nothing was recorded.",
            hint=f"Answer the round's one request, under '{KEY}'.",
        )
    answer = responses.get(KEY)
    if not isinstance(answer, types.ListRootsResult):
        got = "nothing" if answer is None else f"a {answer.__class__.__name__}"
        raise UsageError(
            f"input_responses['{KEY}'] must be a ListRootsResult (the host's roots), not {got}. "
            "Nothing was recorded.",
            hint='Answer with {"roots": [{"uri": "file:///…"}, …]}, or an empty list for none.',
        )
    return list(answer.roots)


def malformed_roots(params: Mapping[str, Any] | None) -> str | None:
    """What is wrong with the roots a `tools/call` retry of a roots round carries, read from its raw
    params (the SDK would refuse them only as "Invalid request parameters"); None: nothing, or no
    roots round's retry."""
    if not params or not str(params.get("requestState", "")).startswith(PREFIX):
        return None
    responses = params.get("inputResponses")
    answer = responses.get(KEY) if isinstance(responses, dict) else None
    if not isinstance(answer, dict) or "roots" not in answer:
        return None  # no roots at all: `checked_roots` says so, or the SDK
    try:
        types.ListRootsResult.model_validate(answer, by_name=False)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(the whole answer)"
        return (
            f"input_responses['{KEY}'] is not a ListRootsResult (the host's roots): {where}: {first['msg']}. "
            "Nothing was recorded."
        )
    return None


async def refuse_malformed_roots(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Middleware: a roots round's retry whose roots are malformed is refused as invalid params,
    saying which field is wrong, before anything runs."""
    if ctx.method == "tools/call" and (wrong := malformed_roots(ctx.params)) is not None:
        raise MCPError(code=types.INVALID_PARAMS, message=wrong)
    return await call_next(ctx)
