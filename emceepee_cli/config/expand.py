"""`${VAR}` in config values: expanded from the environment, and each value it fills in registered
with `redact`, so that value is shown as its `${VAR}` again wherever it is quoted. `$${` is a
literal `${`. Without an environment only the syntax is checked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from emceepee_cli import redact

# `$${` first, so an escaped brace is consumed before it can start a reference.
_REF = re.compile(r"\$\$\{|\$\{(?P<name>[^}]*)(?P<close>\}?)")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
UNSET_HINT = "set it in emceepee's environment, e.g. the \"env\" block of the host's MCP config"


class RefError(Exception):
    def __init__(self, field_name: str, reason: str, hint: str) -> None:
        super().__init__(reason)
        self.field, self.reason, self.hint = field_name, reason, hint


def references(value: str) -> list[str]:
    """The variable names `value` refers to as `${NAME}` (well-formed ones only; `$${` is no reference)."""
    closed = (match for match in _REF.finditer(value) if match.group("close"))
    return [match.group("name") for match in closed if _VAR_NAME.fullmatch(match.group("name"))]


def expand(field_name: str, value: str, environ: Mapping[str, str] | None) -> str:
    """`value` with each `${NAME}` replaced and each `$${` unescaped; errors name `field_name`."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name = match.group("name")
        if not match.group("close"):
            hint = "write ${NAME}, or $${ for a literal ${"
            raise RefError(field_name, f"'${{' has no closing '}}' in {value!r}", hint)
        if not _VAR_NAME.fullmatch(name):
            hint = "names are letters, digits and _, not starting with a digit"
            raise RefError(field_name, f"'${{{name}}}' is not a valid variable reference", hint)
        if environ is None:
            return match.group(0)
        if name not in environ:
            raise RefError(field_name, f"${{{name}}} is not set", UNSET_HINT)
        redact.register(name, environ[name])
        return environ[name]

    return _REF.sub(one, value)
