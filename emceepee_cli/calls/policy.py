"""Which backend tools may run, which only once approved, and how results that drive the workflow
are followed — one pure function per question, called by every path that runs a tool.

`tools.allow` / `tools.deny` (globs, deny wins; no `allow` means every tool) hide a tool from
`list_tools` and refuse it in `execute_tool`, in a chain and on a resume alike. `confirm` globs
and `confirm_destructive` make a call wait for an approval. `destructiveHint` is a hint from an
untrusted backend, so only an explicit `true` (and not `readOnlyHint: true`) counts; `confirm`
patterns, written by the user, are the control to rely on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types

from emceepee_cli.config import Defaults, ServerSpec
from emceepee_cli.config.globs import matches
from emceepee_cli.errors import UsageError


class ToolDenied(UsageError):
    """The user's config does not allow this tool."""


def denied_by(spec: ServerSpec, tool: str) -> str | None:
    """The rule that denies `tool` on this server, as written in the config (None: allowed)."""
    deny = matches(tool, spec.tools.get("deny", ()))
    if deny is not None:
        return f"tools.deny = {list(spec.tools['deny'])} ('{deny}' matches)"
    allow = spec.tools.get("allow")
    if allow is not None and matches(tool, allow) is None:
        return f"tools.allow = {list(allow)} (nothing matches)"
    return None


def visible(spec: ServerSpec, tool: str) -> bool:
    return denied_by(spec, tool) is None


def refuse_denied(spec: ServerSpec, tool: str) -> None:
    rule = denied_by(spec, tool)
    if rule is not None:
        raise denial(spec, tool, rule)


def denial(spec: ServerSpec, tool: str, rule: str) -> ToolDenied:
    """The error for a call of `tool` that `rule` (from `denied_by`) denies."""
    return ToolDenied(
        f"{spec.name}.{tool} is denied by emceepee's config ([servers.{spec.name}] {rule}). "
        "Nothing was sent.",
        hint="Ask the user to change the config if it should be callable.",
        cli_hint=f"Change that rule in [servers.{spec.name}] if it should be callable "
        f"(emceepee servers show {spec.name} names the file).",
    )


def approval_reason(spec: ServerSpec, defaults: Defaults, tool: types.Tool) -> str | None:
    """Why a call of `tool` must be approved first (None: it runs without asking)."""
    pattern = matches(tool.name, spec.confirm)
    if pattern is not None:
        return f"confirm pattern '{pattern}'"
    annotations = tool.annotations
    destructive = annotations is not None and annotations.destructive_hint is True
    read_only = annotations is not None and annotations.read_only_hint is True
    if destructive and not read_only and setting(spec, defaults, "confirm_destructive"):
        return "destructiveHint (confirm_destructive)"
    return None


@dataclass(frozen=True)
class Follow:
    """How one call follows what its results suggest: chained tools, resume tokens."""

    follow_next_tool: bool
    max_chain_depth: int
    auto_resume: bool
    auto_resume_limit: int
    auto_resume_interval_ms: int


def approvers(spec: ServerSpec, defaults: Defaults) -> tuple[str, ...]:
    """Who may accept this server's approvals (`approval_by`): by default a person, through the
    host's own prompt or at a terminal, not the model that made the call."""
    return tuple(setting(spec, defaults, "approval_by"))


def setting(spec: ServerSpec, defaults: Defaults, name: str, override: Any = None) -> Any:
    """A per-call override, else the server's own value, else the [defaults] one."""
    if override is not None:
        return override
    own = getattr(spec, name)
    return getattr(defaults, name) if own is None else own


def follow(
    spec: ServerSpec,
    defaults: Defaults,
    follow_next_tool: bool | None = None,
    auto_resume: bool | None = None,
) -> Follow:
    return Follow(
        follow_next_tool=bool(setting(spec, defaults, "follow_next_tool", follow_next_tool)),
        max_chain_depth=int(setting(spec, defaults, "max_chain_depth")),
        auto_resume=bool(setting(spec, defaults, "auto_resume", auto_resume)),
        auto_resume_limit=int(setting(spec, defaults, "auto_resume_limit")),
        auto_resume_interval_ms=int(setting(spec, defaults, "auto_resume_interval_ms")),
    )
