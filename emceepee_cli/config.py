"""emceepee's TOML config: the [defaults] table and one [servers.NAME] table per backend.

Loading raises only for a file that is not TOML (or cannot be read): a bad server becomes a
`ConfigProblem` and is left out, a bad default falls back to its built-in value, so one typo
cannot take every backend down. `Config.servers` keeps `${VAR}` unexpanded (secrets are neither
shown nor re-saved); `ServerSpec.expanded()` fills them in for spawning, and registers each value
it fills in with `redact`, so that value is shown as its `${VAR}` again wherever it is quoted.
Every read-modify-write of the file holds an exclusive lock on a sibling `config.toml.lock`, so
two writers (two `emceepee servers add`, or the CLI and a serve's `add_server`) never lose each
other's servers; saving rewrites the file atomically (temp file, fsync, replace); comments in a
hand-edited file are lost.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import reprlib
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, cast

import tomli_w

from emceepee_cli import locking, paths, redact
from emceepee_cli.errors import ConfigError, NotFound, UsageError

Policy = Literal["auto", "forward", "park"]
Protocol = Literal["legacy", "modern", "auto"]

POLICIES: tuple[str, ...] = ("auto", "forward", "park")
PROTOCOLS: tuple[str, ...] = ("legacy", "modern", "auto")
TOP_LEVEL = ("defaults", "servers")
# Always fullmatch: `$` in a match() would let "abc\n" through, and a name becomes a file name.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# `$${` first, so an escaped brace is consumed before it can start a reference.
_REF = re.compile(r"\$\$\{|\$\{(?P<name>[^}]*)(?P<close>\}?)")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PERMISSION_HINT = "Check the file's permissions, or point EMCEEPEE_CONFIG at another file."
_UNSET_HINT = "set it in emceepee's environment, e.g. the \"env\" block of the host's MCP config"


@dataclass(frozen=True)
class ServerSpec:
    """One backend: a local command (stdio) or a remote URL (Streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    # repr=False: an expanded spec carries secrets that must not reach a log.
    env: dict[str, str] = field(default_factory=dict[str, str], repr=False)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict[str, str], repr=False)
    enabled: bool = True
    protocol: Protocol = "legacy"
    elicitation: Policy | None = None
    sampling: Policy | None = None

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url is not None else "stdio"

    def to_toml(self) -> dict[str, Any]:
        """The [servers.NAME] table: non-default fields only, values as written (unexpanded)."""
        blank = ServerSpec(self.name)
        return {
            f.name: list(value) if isinstance(value, tuple) else value
            for f in fields(self)
            if f.name != "name" and (value := getattr(self, f.name)) != getattr(blank, f.name)
        }

    def expanded(self, environ: Mapping[str, str] | None = None) -> ServerSpec:
        """A copy with `${VAR}` filled in from `environ` (default os.environ) and `~` expanded."""
        try:
            return _expand_spec(self, os.environ if environ is None else environ)
        except _RefError as exc:
            message = f"Server '{self.name}', field '{exc.field}': {exc.reason}."
            raise ConfigError(message, hint=exc.hint[:1].upper() + exc.hint[1:] + ".") from None


@dataclass(frozen=True)
class Defaults:
    """The [defaults] table. Times are milliseconds, except `retention_s`."""

    timeout_ms: int = 45_000  # execute_tool promotes the call to a task after this
    max_wait_ms: int = 50_000  # clamp for any blocking meta-tool wait (hosts cut off near 60 s)
    task_ttl_ms: int = 300_000
    task_ttl_max_ms: int = 1_800_000
    retention_s: int = 86_400  # finished tasks are kept this long
    pending_timeout_ms: int = 600_000  # a pending elicitation/sampling request expires after this
    elicitation: Policy = "auto"
    sampling: Policy = "auto"


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong in the file; `server`/`field` are None when it is not about one."""

    server: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        # A name with a newline or a control character is shown escaped, on one line.
        shown = self.server if self.server is None or self.server.isprintable() else repr(self.server)[1:-1]
        where = [f"server '{shown}'"] if shown is not None else []
        where += [f"field '{self.field}'"] if self.field is not None else []
        return ": ".join(["config.toml", *([", ".join(where)] if where else []), self.message])


@dataclass(frozen=True)
class Config:
    """A loaded config file: what it says, and what was wrong with it."""

    path: Path
    defaults: Defaults
    servers: dict[str, ServerSpec]
    problems: tuple[ConfigProblem, ...]

    def server(self, name: str) -> ServerSpec:
        if name in self.servers:
            return self.servers[name]
        hint = f"Add it with: emceepee servers add {name} -- <command> [args…]"
        raise _unknown_server(name, self.servers, hint)


def forwarding_policy(spec: ServerSpec | None, defaults: Defaults, kind: str) -> Policy:
    """How a `kind` question of this server may reach the host: its own setting, else the default."""
    own = None if spec is None else spec.sampling if kind == "sampling" else spec.elicitation
    return own or (defaults.sampling if kind == "sampling" else defaults.elicitation)


def load_config(path: Path | None = None) -> Config:
    """Read and check the config file; a missing file is an empty, valid config."""
    path = paths.config_path(path)
    doc = _read_toml(path)
    problems = [_unknown(None, key, TOP_LEVEL, "top-level table") for key in doc if key not in TOP_LEVEL]
    defaults, defaults_problems = _parse_defaults(doc.get("defaults", {}))
    servers, server_problems = _parse_servers(doc.get("servers", {}))
    return Config(path, defaults, servers, tuple(problems + defaults_problems + server_problems))


def check_spec(spec: ServerSpec) -> None:
    """Raise `ConfigError` if `spec` is not a server the config file could hold."""
    _, problems = _parse_server(spec.name, spec.to_toml())
    if problems:
        hint = "Nothing was written or started; fix the value and try again."
        raise ConfigError("\n".join(str(problem) for problem in problems), hint=hint)


def add_server(spec: ServerSpec, path: Path | None = None, *, replace: bool = False) -> Path:
    """Add (or with `replace`, overwrite) [servers.NAME], keeping the rest of the file."""
    path = paths.config_path(path)
    check_spec(spec)
    with locking.locked(path):
        doc = _read_toml(path)
        servers = _servers_table(doc, path)
        if spec.name in servers and not replace:
            hint = f"Remove it first with: emceepee servers remove {spec.name}"
            raise UsageError(f"Server '{spec.name}' already exists in {path}.", hint=hint)
        servers[spec.name] = spec.to_toml()
        _write_toml(path, doc)
    return path


def remove_server(name: str, path: Path | None = None) -> Path:
    """Delete [servers.NAME], keeping the rest of the file."""
    path = paths.config_path(path)
    if not discard_server(name, path):
        servers = _servers_table(_read_toml(path), path)
        raise _unknown_server(name, servers, "See them with: emceepee servers list")
    return path


def discard_server(name: str, path: Path | None = None) -> bool:
    """Delete [servers.NAME] if the file has it; whether it did."""
    path = paths.config_path(path)
    if not path.exists():
        return False  # nothing to remove, and no folder or lock file to create
    with locking.locked(path):
        doc = _read_toml(path)
        servers = _servers_table(doc, path)
        if name not in servers:
            return False
        del servers[name]
        _write_toml(path, doc)
    return True


def parse_env_pairs(pairs: list[str]) -> dict[str, str]:
    """`--env KEY=VALUE` options as a dict; the value may itself contain '='."""
    env: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            problem = "has no '='" if not sep else "has an empty name"
            hint = "Write it as --env NAME=value, e.g. --env 'GIT_TOKEN=${GIT_TOKEN}'."
            raise UsageError(f"--env '{pair}' {problem}; expected NAME=value.", hint=hint)
        env[key] = value
    return env


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fp:
            return tomllib.load(fp)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        hint = "Fix the TOML at that line and column: strings need quotes, tables need [brackets]."
        raise ConfigError(f"{path} is not valid TOML: {exc}.", hint=hint) from None
    except (OSError, UnicodeDecodeError) as exc:  # unreadable, a folder, not UTF-8
        raise ConfigError(f"Cannot read {path}: {exc}.", hint=_PERMISSION_HINT) from None


def _servers_table(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    servers = doc.setdefault("servers", {})
    if not isinstance(servers, dict):
        message = f"In {path}, 'servers' is not a table (got {reprlib.repr(servers)})."
        raise ConfigError(message, hint="Fix it by hand: servers are [servers.NAME] tables.")
    return cast(dict[str, Any], servers)


def _write_toml(path: Path, doc: dict[str, Any]) -> None:
    """Replace `path` atomically with a 0600 file: readers see the old file or the new one."""
    try:
        paths.ensure_private_dir(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ConfigError(f"Cannot write {path}: {exc.strerror}.", hint=_PERMISSION_HINT) from None
    try:
        with os.fdopen(fd, "wb") as fp:  # mkstemp made it 0600, and a umask can only narrow that
            tomli_w.dump(doc, fp)
            fp.flush()
            os.fsync(fp.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class _Reader:
    """Typed access to one TOML table; a bad value becomes a problem, never an exception."""

    def __init__(self, table: Mapping[str, object], server: str | None, prefix: str = "") -> None:
        self.table, self.server, self.prefix = table, server, prefix
        self.problems: list[ConfigProblem] = []

    def add(self, key: str | None, message: str) -> None:
        field_name = None if key is None else self.prefix + key
        self.problems.append(ConfigProblem(self.server, field_name, message))

    def _get(self, key: str, ok: Callable[[Any], bool], expected: str, default: Any = None) -> Any:
        value = self.table.get(key)
        if value is None or ok(value):
            return default if value is None else value
        self.add(key, f"must be {expected} (got {reprlib.repr(value)})")
        return default

    def string(self, key: str) -> str | None:
        return cast("str | None", self._get(key, lambda v: isinstance(v, str), "a string"))

    def strings(self, key: str) -> tuple[str, ...]:
        return tuple(self._get(key, lambda v: _all_str(v, list), "an array of strings", ()))

    def string_table(self, key: str) -> dict[str, str]:
        return dict(self._get(key, lambda v: _all_str(v, dict), 'a table of strings, like { K = "v" }', {}))

    def boolean(self, key: str, default: bool) -> bool:
        return cast(bool, self._get(key, lambda v: isinstance(v, bool), "true or false", default))

    def positive_int(self, key: str, default: int) -> int:
        return cast(int, self._get(key, lambda v: type(v) is int and v > 0, "a positive integer", default))

    def choice(self, key: str, choices: tuple[str, ...], default: str | None = None) -> Any:
        return self._get(key, lambda v: v in choices, f"one of {', '.join(choices)}", default)


def _parse_defaults(raw: object) -> tuple[Defaults, list[ConfigProblem]]:
    if not isinstance(raw, dict):
        return Defaults(), [ConfigProblem(None, "defaults", f"must be a table (got {reprlib.repr(raw)})")]
    table = cast(dict[str, object], raw)
    known = tuple(f.name for f in fields(Defaults))
    problems = [_unknown(None, f"defaults.{key}", known) for key in table if key not in known]
    r, base = _Reader(table, None, "defaults."), Defaults()
    # Each default is a positive integer or a policy; its built-in value says which.
    values: dict[str, Any] = {
        name: r.positive_int(name, value) if isinstance(value, int) else r.choice(name, POLICIES, value)
        for name, value in vars(base).items()
    }
    defaults = Defaults(**values)
    if defaults.task_ttl_ms > defaults.task_ttl_max_ms:
        r.add("task_ttl_ms", f"must not exceed task_ttl_max_ms (got {defaults.task_ttl_ms})")
        defaults = replace(defaults, task_ttl_ms=min(base.task_ttl_ms, defaults.task_ttl_max_ms))
    return defaults, problems + r.problems


def _parse_servers(raw: object) -> tuple[dict[str, ServerSpec], list[ConfigProblem]]:
    if not isinstance(raw, dict):
        message = f"must be a table of [servers.NAME] tables (got {reprlib.repr(raw)})"
        return {}, [ConfigProblem(None, "servers", message)]
    servers: dict[str, ServerSpec] = {}
    problems: list[ConfigProblem] = []
    for name, table in cast(dict[str, object], raw).items():
        spec, server_problems = _parse_server(name, table)
        if spec is not None and spec.enabled:  # a disabled server needs no secrets until enabled
            server_problems = _ref_problems(spec, os.environ)
        if spec is not None and not server_problems:
            servers[name] = spec
        problems += server_problems
    return servers, problems


def _parse_server(name: str, raw: object) -> tuple[ServerSpec | None, list[ConfigProblem]]:
    """Check one [servers.NAME] table; `${VAR}` syntax is checked, presence is not."""
    problems = [ConfigProblem(name, None, message) for message in _name_problems(name)]
    if not isinstance(raw, dict):
        message = f"must be a table like [servers.{name}] (got {reprlib.repr(raw)})"
        return None, [*problems, ConfigProblem(name, None, message)]
    table = cast(dict[str, object], raw)
    known = tuple(f.name for f in fields(ServerSpec) if f.name != "name")
    problems += [_unknown(name, key, known) for key in table if key not in known]
    r = _Reader(table, name)
    spec = ServerSpec(
        name=name,
        command=r.string("command"),
        args=r.strings("args"),
        env=r.string_table("env"),
        cwd=r.string("cwd"),
        url=r.string("url"),
        headers=r.string_table("headers"),
        enabled=r.boolean("enabled", True),
        protocol=r.choice("protocol", PROTOCOLS, "legacy"),
        elicitation=r.choice("elicitation", POLICIES),
        sampling=r.choice("sampling", POLICIES),
    )
    _check_shape(table, r)
    problems += r.problems or _ref_problems(spec, None)
    return (None if problems else spec), problems


def _check_shape(table: Mapping[str, object], r: _Reader) -> None:
    """Exactly one of command/url, not empty; a literal url must be http(s)."""
    if "command" in table and "url" in table:
        r.add(None, "has both 'command' and 'url'; keep 'command' (local) or 'url' (remote)")
    elif not table.get("command") and not table.get("url"):
        r.add(None, "needs a non-empty 'command' (a local server) or 'url' (a remote one)")
    url = table.get("url")
    if isinstance(url, str) and "${" not in url and not url.startswith(("http://", "https://")):
        r.add("url", f"must start with http:// or https:// (got {url!r})")


def _name_problems(name: str) -> list[str]:
    if not _NAME.fullmatch(name):
        return ["bad name: use 1-64 letters, digits, '_' or '-', starting with a letter or digit"]
    return ["bad name: '__' is reserved (it joins server and tool names)"] if "__" in name else []


def _ref_problems(spec: ServerSpec, environ: Mapping[str, str] | None) -> list[ConfigProblem]:
    """`${VAR}` references that are malformed, or (given an environ) not set in it."""
    try:
        _expand_spec(spec, environ)
    except _RefError as exc:
        return [ConfigProblem(spec.name, exc.field, f"{exc.reason}; {exc.hint}")]
    return []


def _unknown(server: str | None, name: str, known: tuple[str, ...], what: str = "field") -> ConfigProblem:
    close = difflib.get_close_matches(name.rpartition(".")[2], known, n=1)
    suggestion = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(known)}"
    return ConfigProblem(server, name, f"unknown {what}; {suggestion}")


def _unknown_server(name: str, known: Mapping[str, object], hint: str) -> NotFound:
    return NotFound(f"Unknown server '{name}'. Known: {', '.join(known) or '(none)'}.", hint=hint)


def _all_str(value: object, kind: type[list[Any]] | type[dict[str, Any]]) -> bool:
    """`value` is a TOML array (or table) whose every item (or value) is a string."""
    if not isinstance(value, kind):
        return False
    items = cast(dict[str, object], value).values() if isinstance(value, dict) else cast(list[object], value)
    return all(isinstance(item, str) for item in items)


class _RefError(Exception):
    def __init__(self, field_name: str, reason: str, hint: str) -> None:
        super().__init__(reason)
        self.field, self.reason, self.hint = field_name, reason, hint


def _expand_spec(spec: ServerSpec, environ: Mapping[str, str] | None) -> ServerSpec:
    """Expand every field that may hold `${VAR}`; with environ None, only check the syntax."""
    # expanduser only touches a leading `~`, so `--repo=~/x` is passed through as written.
    args = tuple(os.path.expanduser(_expand(f"args[{i}]", arg, environ)) for i, arg in enumerate(spec.args))
    env = {key: _expand(f"env.{key}", value, environ) for key, value in spec.env.items()}
    headers = {key: _expand(f"headers.{key}", value, environ) for key, value in spec.headers.items()}
    url = None if spec.url is None else _expand("url", spec.url, environ)
    cwd = None if spec.cwd is None else os.path.expanduser(_expand("cwd", spec.cwd, environ))
    return replace(spec, args=args, env=env, headers=headers, url=url, cwd=cwd)


def _expand(field_name: str, value: str, environ: Mapping[str, str] | None) -> str:
    """`value` with each `${NAME}` replaced and each `$${` unescaped; errors name `field_name`."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name = match.group("name")
        if not match.group("close"):
            hint = "write ${NAME}, or $${ for a literal ${"
            raise _RefError(field_name, f"'${{' has no closing '}}' in {value!r}", hint)
        if not _VAR_NAME.fullmatch(name):
            hint = "names are letters, digits and _, not starting with a digit"
            raise _RefError(field_name, f"'${{{name}}}' is not a valid variable reference", hint)
        if environ is None:
            return match.group(0)
        if name not in environ:
            raise _RefError(field_name, f"${{{name}}} is not set", _UNSET_HINT)
        redact.register(name, environ[name])
        return environ[name]

    return _REF.sub(one, value)
