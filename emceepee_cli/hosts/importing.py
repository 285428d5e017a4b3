"""Moving a host's MCP servers into emceepee's config (`emceepee import HOST`).

Each entry of the host's file becomes a `ServerSpec` (one on the legacy HTTP+SSE transport with
`transport = "sse"`), or is skipped with the reason (emceepee itself, a name already in emceepee's
config, a value only the host can fill in). A value that looks like a secret is not written to
emceepee's config: the config gets `${VAR}` and the value goes to the `env` block of emceepee's
own entry in the host's file, which is where the host gives emceepee its environment. Nothing here
prints: the plan is rendered by the CLI, and its rows show `${VAR}`, never a value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from emceepee_cli.config import ServerSpec
from emceepee_cli.hosts.catalog import Host, is_emceepee

_SECRET_NAME = re.compile(
    r"token|secret|passw|api[_-]?key|access[_-]?key|private[_-]?key|credential|auth|cookie", re.I
)
_RANDOM = re.compile(r"[A-Za-z0-9_\-+/=.]{20,}")
_USERINFO = re.compile(r"://[^/@\s]+:[^/@\s]+@")
_SECRET_QUERY = re.compile(r"[?&](?:key|token|api[_-]?key|access[_-]?token|secret)=", re.I)
_HOST_ONLY = re.compile(r"\$\{(?:input|workspaceFolder|workspaceRoot|userHome|command|config):?[^}]*\}")
_ENV_FORM = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
CARRIED = {
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "serverUrl",
    "httpUrl",
    "headers",
    "type",
    "transport",
    "disabled",
}


def looks_secret(name: str, value: str) -> bool:
    """A value to keep out of files and tables: named like a credential, or random-looking, or a
    URL with a password or a key in it. A `${VAR}` reference is not a secret: it names one."""
    if not value or "${" in value:
        return False
    if _SECRET_NAME.search(name):
        return True
    if _USERINFO.search(value) or _SECRET_QUERY.search(value):
        return True
    random = _RANDOM.fullmatch(value) is not None and not value.startswith(("/", "."))
    return random and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


@dataclass(frozen=True)
class Secret:
    """A value of a server that looks like a secret: where it is, and the `${VAR}` form to write
    instead (the value itself is not kept)."""

    field: str  # env.NAME, headers.NAME or url
    var: str
    form: str


_SCHEME = re.compile(r"(?:Bearer|Basic|Token)\s+(?=\S)", re.I)


def secrets_in(spec: ServerSpec) -> list[Secret]:
    """The values of `spec` that `import` would keep out of emceepee's config (env, headers, url),
    each with its `${VAR}`: named after the variable for env, after server and key otherwise (as
    `import` names them). An Authorization scheme (`Bearer …`) stays outside the reference."""
    found = [
        _secret(f"env.{key}", env_name(key)) for key, value in spec.env.items() if looks_secret(key, value)
    ]
    for key, value in spec.headers.items():
        if looks_secret(key, value):
            scheme = _SCHEME.match(value)
            found.append(
                _secret(f"headers.{key}", env_name(spec.name, key), scheme.group(0) if scheme else "")
            )
    if spec.url is not None and looks_secret("url", spec.url):
        found.append(_secret("url", env_name(spec.name, "url")))
    return found


def _secret(field_name: str, var: str, scheme: str = "") -> Secret:
    return Secret(field_name, var, f"{scheme}${{{var}}}")


def env_name(*parts: str) -> str:
    name = re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_").upper()
    return name if name and not name[0].isdigit() else f"V_{name}"


@dataclass
class Moved:
    name: str
    spec: ServerSpec
    source: str  # the host's name for it, if it was renamed
    notes: list[str] = field(default_factory=list)


@dataclass
class Skipped:
    name: str
    reason: str
    already: bool = False  # the same name is in emceepee's config


@dataclass
class Plan:
    moved: list[Moved] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)  # VAR -> value, for emceepee's entry env

    def secret_var(self, preferred: str, value: str, taken: Mapping[str, str]) -> str:
        """A variable name for `value`: `preferred`, unless it already names another value."""
        name, n = preferred, 1
        while (self.secrets.get(name, value) != value) or (taken.get(name, value) != value):
            n += 1
            name = f"{preferred}_{n}"
        self.secrets[name] = value
        return f"${{{name}}}"


def plan(
    host: Host, entries: Mapping[str, Any], known: Mapping[str, ServerSpec], env: Mapping[str, str]
) -> Plan:
    """What importing `entries` (the host's servers) into a config that has `known` would do.
    `env` is the env block emceepee's entry in the host already has."""
    out = Plan()
    for source, entry in entries.items():
        if not isinstance(entry, dict):
            out.skipped.append(Skipped(source, "is not an object"))
        elif is_emceepee(source, entry):
            out.skipped.append(Skipped(source, "is emceepee itself"))
        else:
            _one(host, source, entry, known, env, out)
    return out


def _one(
    host: Host,
    source: str,
    entry: dict[str, Any],
    known: Mapping[str, ServerSpec],
    env: Mapping[str, str],
    out: Plan,
) -> None:
    name = _emceepee_name(source)
    if name in known or any(m.name == name for m in out.moved):
        out.skipped.append(Skipped(source, f"'{name}' is already in emceepee's config", already=True))
        return
    if host_only := _HOST_ONLY.search(repr(entry)):
        out.skipped.append(Skipped(source, f"uses {host_only.group(0)}, which only {host.title} can fill in"))
        return
    url, transport = host.url_of(entry)
    if url is None and not isinstance(entry.get("command"), str):
        out.skipped.append(Skipped(source, "has neither a command nor a URL"))
        return
    notes = [f"not carried: {', '.join(sorted(set(entry) - CARRIED))}"] if set(entry) - CARRIED else []
    values: dict[str, str] = {}
    for key, value in _strings(entry.get("env")).items():
        values[f"env.{key}"] = _value(out, name, key, value, env, prefer=key)
    for key, value in _strings(entry.get("headers")).items():
        values[f"headers.{key}"] = _value(out, name, key, value, env, prefer=env_name(name, key))
    spec = ServerSpec(
        name=name,
        command=None if url else str(entry["command"]),
        args=tuple(_translate(str(a)) for a in entry.get("args") or [] if isinstance(a, (str, int, float)))
        if not url
        else (),
        env={k.removeprefix("env."): v for k, v in values.items() if k.startswith("env.")},
        cwd=_translate(entry["cwd"]) if isinstance(entry.get("cwd"), str) and not url else None,
        url=_value(out, name, "url", url, env, prefer=env_name(name, "url")) if url else None,
        headers={k.removeprefix("headers."): v for k, v in values.items() if k.startswith("headers.")},
        enabled=not entry.get("disabled", False),
        remote_transport="sse" if transport == "sse" else "http",
    )
    from emceepee_cli import config as config_mod

    _, problems = config_mod.parse_server(name, spec.to_toml())
    if problems:
        out.skipped.append(
            Skipped(
                source, "; ".join(p.message if not p.field else f"{p.field}: {p.message}" for p in problems)
            )
        )
        return
    if name != source:
        notes.insert(0, f"renamed from '{source}' (emceepee names are letters, digits, '_' and '-')")
    out.moved.append(Moved(name, spec, source, notes))


def _value(out: Plan, server: str, key: str, value: str, env: Mapping[str, str], prefer: str) -> str:
    value = _translate(value)
    if looks_secret(key, value):
        return out.secret_var(env_name(prefer), value, env)
    return value


def _translate(value: str) -> str:
    """A host's spelling of an environment reference (`${env:VAR}`) as emceepee's (`${VAR}`)."""
    return _ENV_FORM.sub(lambda m: f"${{{m.group(1)}}}", value)


def _strings(table: object) -> dict[str, str]:
    if not isinstance(table, dict):
        return {}
    return {str(k): str(v) for k, v in table.items() if isinstance(v, (str, int, float, bool))}


def _emceepee_name(source: str) -> str:
    name = _BAD_NAME_CHARS.sub("-", source).strip("-_")
    while "__" in name:
        name = name.replace("__", "_")
    return (name or "server")[:64]
