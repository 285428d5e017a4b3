"""Whether a call of a backend's tool may be sent: one rule, for every path that sends one.

    deny     the config's tools.allow / tools.deny refuse the tool (calls/policy.py)   Denied
    listed   the backend does not list it, even after one fresh listing               Unlisted
    schema   the tool's input schema, as listed, rejects the arguments                 Invalid

The steps run in that order and the first that refuses is the answer, so a denied tool is refused
before the backend is asked anything. `admit` returns which step refused, as a value, so that each
path says it in its own words: `execute_tool` (session/servers.py) and `emceepee call`
(calls/oneshot.py) raise `refused(…)` with a hint for their reader, and a chain (calls/chain.py)
stops before the next tool with a note. A refused call is never sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from emceepee_cli import schema
from emceepee_cli.backends.backend import Backend
from emceepee_cli.calls import policy
from emceepee_cli.config import ServerSpec
from emceepee_cli.errors import EmceepeeError, UsageError

# The call's arguments, or how to make them from the tool's listing (`emceepee call` reads its
# NAME=VALUE pairs by the input schema).
Arguments = dict[str, Any] | Callable[[types.Tool], dict[str, Any]]


@dataclass(frozen=True)
class Admitted:
    """The call may be sent: the tool as the backend lists it, and arguments its schema accepts."""

    tool: types.Tool
    args: dict[str, Any]


@dataclass(frozen=True)
class Denied:
    """The config denies the tool; `rule` is the rule as the config writes it."""

    spec: ServerSpec
    tool: str
    rule: str


@dataclass(frozen=True)
class Unlisted:
    """The backend does not list the tool: `cause` is its `NotFound` (with the closest names), or
    why the fresh listing failed."""

    server: str
    tool: str
    cause: EmceepeeError


@dataclass(frozen=True)
class Invalid:
    """The tool's input schema rejects the arguments; each problem as a `path: reason` line."""

    server: str
    tool: str
    problems: tuple[str, ...]


Refusal = Denied | Unlisted | Invalid


async def admit(backend: Backend, tool: str, args: Arguments) -> Admitted | Refusal:
    """The rule's answer for calling `tool` on `backend` with `args`: deny, then listed, then schema."""
    rule = policy.denied_by(backend.spec, tool)
    if rule is not None:
        return Denied(backend.spec, tool, rule)
    try:
        listed = await backend.tool(tool)
    except EmceepeeError as exc:
        return Unlisted(backend.name, tool, exc)
    given = args(listed) if callable(args) else args
    problems = schema.problems(given, listed.input_schema)
    if problems:
        return Invalid(backend.name, tool, tuple(problems))
    return Admitted(listed, given)


def refused(refusal: Refusal, *, schema_hint: str) -> EmceepeeError:
    """A refusal as the error a caller raises; `schema_hint` tells its reader (a host's model, a
    person at a terminal) what was not sent and where the tool's schema is shown."""
    match refusal:
        case Denied(spec=spec, tool=tool, rule=rule):
            return policy.denial(spec, tool, rule)
        case Unlisted(cause=cause):
            return cause
        case Invalid(server=server, tool=tool, problems=problems):
            return UsageError(
                f"Arguments for {server}.{tool} do not match its input schema:\n- " + "\n- ".join(problems),
                hint=schema_hint,
            )
