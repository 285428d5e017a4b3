"""A backend's start as one shell command line, in the environment a host gives emceepee.

`doctor` starts each backend the way a host would: a short PATH, the `env` block of emceepee's
entry in the host's config, and only the variables a backend is given (backends/environment.py).
When a backend fails there, "run it in a terminal" in the user's own shell would often work
(a longer PATH, a venv, every variable set) and so hide the failure. The line made here starts it
in that same small environment instead (`env -i NAME=value … command args`), quoted for a POSIX
shell, so that pasting it shows what the host sees.

No secret is written out: a `${VAR}` of the config stays `"${VAR}"` (the shell fills it in from
its own environment when the line runs), and a value that looks like a credential is shown as
`"${NAME}"` of its own name.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass

from emceepee_cli.backends.environment import backend_env
from emceepee_cli.config import ServerSpec
from emceepee_cli.hosts.importing import looks_secret

_REF = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # as config/expand.py reads them


def shell_word(value: str) -> str:
    """`value` from the config as one shell word: literal text quoted, each `${VAR}` left for the
    shell to fill in ("${VAR}"), each `$${` a literal `${`."""
    parts: list[str] = []
    literal, at = "", 0
    for ref in _REF.finditer(value):
        literal += value[at : ref.start()]
        at = ref.end()
        if ref.group(1) is None:  # `$${`: a literal `${`
            literal += "${"
            continue
        if literal:
            parts.append(shlex.quote(literal))
        parts.append(f'"${{{ref.group(1)}}}"')
        literal = ""
    literal += value[at:]
    if literal or not parts:
        parts.append(shlex.quote(literal))
    return "".join(parts)


@dataclass(frozen=True)
class Reproduction:
    """The command line, and the variables it leaves for the shell to fill in (in order)."""

    line: str
    reads: tuple[str, ...]


def reproduce(spec: ServerSpec, host_env: Mapping[str, str]) -> Reproduction:
    """The command line that starts the stdio backend `spec` as emceepee under a host whose
    environment is `host_env`: `[cd DIR && ]env -i NAME=value … command args`."""
    given = backend_env({}, spec.pass_env, host_env)  # what reaches a backend of emceepee's own
    words = ["env", "-i"]
    hidden: list[str] = []
    for name, value in [*sorted((k, v) for k, v in given.items() if k not in spec.env), *spec.env.items()]:
        if looks_secret(name, value):
            hidden.append(name)
            words.append(f'{name}="${{{name}}}"')
        else:  # a value from the config may hold ${VAR}; one from the host's environment is as it is
            words.append(f"{name}={shell_word(value) if name in spec.env else shlex.quote(value)}")
    words += [_argument(spec.command or ""), *(_argument(arg) for arg in spec.args)]
    line = " ".join(words)
    if spec.cwd:
        line = f"cd {_argument(spec.cwd)} && {line}"
    values = [spec.command or "", *spec.args, *spec.env.values(), spec.cwd or ""]
    refs = [ref.group(1) for value in values for ref in _REF.finditer(value) if ref.group(1)]
    return Reproduction(line, tuple(dict.fromkeys([*refs, *hidden])))


def _argument(value: str) -> str:
    """A command, argument or folder as a word: a leading `~` is expanded as emceepee expands it."""
    return shell_word(os.path.expanduser(value) if value.startswith("~") else value)
