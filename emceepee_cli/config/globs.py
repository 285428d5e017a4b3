"""Tool-name patterns in the config (`tools.allow`, `tools.deny`, `confirm`): globs, not regexes.

A glob matches the *whole* name (`delete_*`), case-sensitively, as tool names are. A regular
expression matched by search would match parts of names, so `deny = ["delete"]` would also deny
`undelete_note`, and a forgotten anchor would quietly widen a security rule; so a pattern with
anything a tool name and a glob cannot hold is refused when the config is loaded.
"""

from __future__ import annotations

import fnmatch
import re

_GLOB = re.compile(r"[A-Za-z0-9._\-*?\[\]!/]+")


def glob_problem(pattern: str) -> str | None:
    """Why `pattern` is not a tool-name glob (None: it is one)."""
    if not pattern:
        return "is empty; give a tool name or a glob such as 'delete_*'"
    if not _GLOB.fullmatch(pattern):
        return (
            f"{pattern!r} is not a glob of tool names (letters, digits, . _ - / and * ? [ ] !); "
            "patterns are globs matched against the whole name, e.g. 'delete*', not regular expressions"
        )
    return None


def matches(name: str, patterns: tuple[str, ...] | list[str]) -> str | None:
    """The first pattern matching the whole of `name` (case-sensitive), or None."""
    return next((p for p in patterns if fnmatch.fnmatchcase(name, p)), None)
