"""Loading the config file: only a file that is not TOML (or cannot be read) raises.

A bad server becomes a `ConfigProblem` and is left out, a bad default falls back to its built-in
value, so one typo cannot take every backend down.
"""

from __future__ import annotations

import difflib
import os
import re
import reprlib
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from emceepee_cli import paths
from emceepee_cli.config.expand import RefError, references
from emceepee_cli.config.globs import glob_problem
from emceepee_cli.config.model import (
    APPROVERS,
    EXPOSES,
    POLICIES,
    PROTOCOLS,
    REMOTE_TRANSPORTS,
    SERVER_CHANGES,
    TOKEN_ENDPOINT_AUTH_METHODS,
    TOML_KEYS,
    Config,
    ConfigProblem,
    Defaults,
    FleetSettings,
    OAuthSpec,
    PathBase,
    ServerSpec,
    expand_spec,
)
from emceepee_cli.errors import ConfigError

TOP_LEVEL = ("defaults", "servers", "fleet")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")
RESERVED_NAME = "emceepee"  # the `server` of emceepee's own questions (session/server_changes.py)

# Always fullmatch: `$` in a match() would let "abc\n" through, and a name becomes a file name.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
PERMISSION_HINT = "Check the file's permissions, or point EMCEEPEE_CONFIG at another file."
_VAR_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def load_config(
    path: Path | None = None, environ: Mapping[str, str] | None = None, cwd: str | None = None
) -> Config:
    """Read and check the config file; a missing file is an empty, valid config. `${VAR}` must be
    set in `environ`, and a relative root (or `~`) is taken from `cwd` and environ's HOME (default
    emceepee's own; in the fleet, the host's: fleet/daemon.py)."""
    path = paths.config_path(path)
    doc = read_toml(path)
    base = PathBase(cwd, environ)
    problems = [_unknown(None, key, TOP_LEVEL, "top-level table") for key in doc if key not in TOP_LEVEL]
    defaults, defaults_problems = _parse_defaults(doc.get("defaults", {}), base)
    servers, server_problems = _parse_servers(
        doc.get("servers", {}), os.environ if environ is None else environ, base
    )
    fleet, fleet_problems = parse_fleet(doc.get("fleet", {}))
    found = problems + defaults_problems + server_problems + fleet_problems
    return Config(path, defaults, servers, tuple(replace(p, file=path.name) for p in found), fleet)


def check_spec(spec: ServerSpec, base: PathBase | None = None) -> None:
    """Raise `ConfigError` if `spec` is not a server the config file could hold (its relative roots
    taken from `base`, default emceepee's working directory)."""
    _, problems = parse_server(spec.name, spec.to_toml(), base)
    if problems:
        hint = "Nothing was written or started; fix the value and try again."
        raise ConfigError("\n".join(str(problem) for problem in problems), hint=hint)


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return parse_toml(path.read_bytes().decode("utf-8"), path)
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:  # unreadable, a folder, not UTF-8
        raise ConfigError(f"Cannot read {path}: {exc}.", hint=PERMISSION_HINT) from None


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """The text of the file at `path` as TOML."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        hint = "Fix the TOML at that line and column: strings need quotes, tables need [brackets]."
        raise ConfigError(f"{path} is not valid TOML: {exc}.", hint=hint) from None


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

    def optional_boolean(self, key: str) -> bool | None:
        return cast("bool | None", self._get(key, lambda v: isinstance(v, bool), "true or false"))

    def optional_int(self, key: str) -> int | None:
        return cast("int | None", self._get(key, lambda v: type(v) is int and v > 0, "a positive integer"))

    def choice(self, key: str, choices: tuple[str, ...], default: str | None = None) -> Any:
        return self._get(key, lambda v: v in choices, f"one of {', '.join(choices)}", default)


def _parse_defaults(raw: object, where: PathBase) -> tuple[Defaults, list[ConfigProblem]]:
    if not isinstance(raw, dict):
        return Defaults(), [ConfigProblem(None, "defaults", f"must be a table (got {reprlib.repr(raw)})")]
    table = cast(dict[str, object], raw)
    known = tuple(f.name for f in fields(Defaults))
    problems = [_unknown(None, f"defaults.{key}", known) for key in table if key not in known]
    r, base = _Reader(table, None, "defaults."), Defaults()
    # Each default is a boolean, a positive integer or a policy; its built-in value says which.
    special = {"roots", "expose", "pass_env", "approval_by", "model_adds_servers"}
    values: dict[str, Any] = {
        name: _default(r, name, value) for name, value in vars(base).items() if name not in special
    }
    values["pass_env"] = _pass_env(r)
    defaults = Defaults(
        **values,
        roots=_roots(r, where),
        expose=r.choice("expose", EXPOSES, base.expose),
        approval_by=_approvers(r) or base.approval_by,
        model_adds_servers=r.choice("model_adds_servers", SERVER_CHANGES, base.model_adds_servers),
    )
    if defaults.task_ttl_ms > defaults.task_ttl_max_ms:
        r.add("task_ttl_ms", f"must not exceed task_ttl_max_ms (got {defaults.task_ttl_ms})")
        defaults = replace(defaults, task_ttl_ms=min(base.task_ttl_ms, defaults.task_ttl_max_ms))
    return defaults, problems + r.problems


def _default(r: _Reader, name: str, value: object) -> Any:
    if isinstance(value, bool):
        return r.boolean(name, value)
    if isinstance(value, int):
        return r.positive_int(name, value)
    return r.choice(name, POLICIES, str(value))


def fleet_settings(path: Path) -> FleetSettings:
    """The [fleet] table of the file at `path` alone (what the front and the fleet read before
    anything else); its built-in values when the file cannot be read or is not TOML (the server
    reports that)."""
    try:
        return parse_fleet(read_toml(path).get("fleet", {}))[0]
    except ConfigError:
        return FleetSettings()


def parse_fleet(raw: object) -> tuple[FleetSettings, list[ConfigProblem]]:
    """The [fleet] table; a bad value falls back to its built-in one, said as a problem."""
    if not isinstance(raw, dict):
        return FleetSettings(), [ConfigProblem(None, "fleet", f"must be a table (got {reprlib.repr(raw)})")]
    table = cast(dict[str, object], raw)
    known = ("enabled", "idle_exit")
    problems = [_unknown(None, f"fleet.{key}", known) for key in table if key not in known]
    r, base = _Reader(table, None, "fleet."), FleetSettings()
    enabled = r.optional_boolean("enabled")
    idle_exit_s = base.idle_exit_s
    if "idle_exit" in table:
        seconds = duration_s(table["idle_exit"])
        if seconds is None:
            r.add(
                "idle_exit",
                f'must be a duration like "10m", "30s" or "0" (got {reprlib.repr(table["idle_exit"])})',
            )
        else:
            idle_exit_s = seconds
    return FleetSettings(enabled=enabled, idle_exit_s=idle_exit_s), problems + r.problems


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h)?")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration_s(value: object) -> float | None:
    """Seconds in a duration written as "10m", "30s", "1.5h", "250ms" or a bare number of seconds
    (a TOML number too); None when `value` is not one."""
    if type(value) in (int, float) and 0 <= cast(float, value) < float("inf"):
        return float(cast(float, value))
    match = _DURATION.fullmatch(value.strip()) if isinstance(value, str) else None
    return None if match is None else float(match.group(1)) * _UNIT_S[match.group(2)]


def _parse_servers(
    raw: object, environ: Mapping[str, str], base: PathBase
) -> tuple[dict[str, ServerSpec], list[ConfigProblem]]:
    if not isinstance(raw, dict):
        message = f"must be a table of [servers.NAME] tables (got {reprlib.repr(raw)})"
        return {}, [ConfigProblem(None, "servers", message)]
    servers: dict[str, ServerSpec] = {}
    problems: list[ConfigProblem] = []
    for name, table in cast(dict[str, object], raw).items():
        spec, server_problems = parse_server(name, table, base)
        if spec is not None and spec.enabled:  # a disabled server needs no secrets until enabled
            server_problems = _ref_problems(spec, environ)
        if spec is not None and not server_problems:
            servers[name] = spec
        problems += server_problems
    return servers, problems


def parse_server(
    name: str, raw: object, base: PathBase | None = None
) -> tuple[ServerSpec | None, list[ConfigProblem]]:
    """Check one [servers.NAME] table; `${VAR}` syntax is checked, presence is not. Its roots must
    be directories, a relative one from `base` (default emceepee's working directory)."""
    problems = [ConfigProblem(name, None, message) for message in _name_problems(name)]
    if not isinstance(raw, dict):
        message = f"must be a table like [servers.{name}] (got {reprlib.repr(raw)})"
        return None, [*problems, ConfigProblem(name, None, message)]
    table = cast(dict[str, object], raw)
    known = tuple(TOML_KEYS.get(f.name, f.name) for f in fields(ServerSpec) if f.name != "name")
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
        pass_env=_pass_env(r),
        follow_next_tool=r.optional_boolean("follow_next_tool"),
        max_chain_depth=r.optional_int("max_chain_depth"),
        auto_resume=r.optional_boolean("auto_resume"),
        auto_resume_limit=r.optional_int("auto_resume_limit"),
        auto_resume_interval_ms=r.optional_int("auto_resume_interval_ms"),
        confirm_destructive=r.optional_boolean("confirm_destructive"),
        tools=_tool_patterns(r),
        confirm=_globs(r, "confirm", r.strings("confirm")),
        approval_by=_approvers(r),
        roots=_roots(r, base or PathBase()),
        expose=r.choice("expose", EXPOSES),
        remote_transport=_transport(r),
        oauth=_oauth(r),
        per_host=r.boolean("per_host", False),
    )
    _check_shape(table, r)
    _check_remote(table, r)
    problems += r.problems or _ref_problems(spec, None)
    return (None if problems else spec), problems


def _pass_env(r: _Reader) -> tuple[str, ...]:
    """Variable names, or prefixes ending in `*` (like `LC_*`)."""
    names = r.strings("pass_env")
    bad = [n for n in names if not _ENV_NAME.fullmatch(n)]
    if bad:
        r.add("pass_env", f"must be variable names or prefixes ending in '*', like LC_* (got {bad[0]!r})")
        return ()
    return names


def _tool_patterns(r: _Reader) -> dict[str, tuple[str, ...]]:
    """`tools = { allow = [...], deny = [...] }`: glob patterns of tool names."""
    raw = r.table.get("tools")
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) - {"allow", "deny"}:
        r.add("tools", 'must be a table like { allow = ["name*"], deny = ["delete_*"] }')
        return {}
    sub = _Reader(cast(dict[str, object], raw), r.server, r.prefix + "tools.")
    out = {key: _globs(sub, key, sub.strings(key)) for key in ("allow", "deny") if key in raw}
    r.problems += sub.problems
    return out


def _globs(r: _Reader, key: str, values: tuple[str, ...]) -> tuple[str, ...]:
    """Tool-name globs; something that is not one (a regular expression, say) is a problem."""
    for i, value in enumerate(values):
        problem = glob_problem(value)
        if problem:
            r.add(f"{key}[{i}]", problem)
    return values


def _approvers(r: _Reader) -> tuple[str, ...] | None:
    """`approval_by`: who may accept an approval, some of host, cli and model (None: not given)."""
    if "approval_by" not in r.table:
        return None
    before = len(r.problems)
    names = r.strings("approval_by")
    if len(r.problems) > before:  # not an array of strings: said so
        return None
    wrong = [name for name in names if name not in APPROVERS]
    if wrong or not names:
        shown = ", ".join(repr(name) for name in wrong) or "an empty list"
        r.add("approval_by", f"must list some of {', '.join(APPROVERS)} (got {shown})")
        return None
    return tuple(dict.fromkeys(names))


def _roots(r: _Reader, base: PathBase) -> tuple[str, ...]:
    """The `roots` array, as written; each must be a directory now, seen from `base` (a typo would
    show a backend nothing)."""
    roots = r.strings("roots")
    for path in roots:
        if not base.directory(path).is_dir():
            r.add("roots", f"'{path}' is not a directory; roots must be existing directories")
    return tuple(p for p in roots if base.directory(p).is_dir())


def _check_shape(table: Mapping[str, object], r: _Reader) -> None:
    """Exactly one of command/url, not empty; a literal url must be http(s)."""
    if "command" in table and "url" in table:
        r.add(None, "has both 'command' and 'url'; keep 'command' (local) or 'url' (remote)")
    elif not table.get("command") and not table.get("url"):
        r.add(None, "needs a non-empty 'command' (a local server) or 'url' (a remote one)")
    url = table.get("url")
    if isinstance(url, str) and "${" not in url and not url.startswith(("http://", "https://")):
        r.add("url", f"must start with http:// or https:// (got {url!r})")


def _transport(r: _Reader) -> Any:
    """`transport`: how a `url` is reached, "http" (Streamable HTTP, the default) or "sse"."""
    value = r.table.get("transport", "http")
    if value not in REMOTE_TRANSPORTS:
        r.add(
            "transport",
            'must be "http" (Streamable HTTP, the default for a url) or "sse" (the legacy HTTP+SSE '
            f"transport) (got {reprlib.repr(value)})",
        )
        return "http"
    return value


def _oauth(r: _Reader) -> OAuthSpec | None:
    """The [servers.NAME.oauth] table: how emceepee signs in to this remote server."""
    raw = r.table.get("oauth")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        r.add("oauth", f"must be a table like [servers.{r.server}.oauth] (got {reprlib.repr(raw)})")
        return None
    table = cast(dict[str, object], raw)
    known = tuple(f.name for f in fields(OAuthSpec))
    r.problems += [_unknown(r.server, f"oauth.{key}", known) for key in table if key not in known]
    sub = _Reader(table, r.server, "oauth.")
    oauth = OAuthSpec(
        client_id=sub.string("client_id"),
        client_secret=_client_secret(sub),
        client_metadata_url=_metadata_url(sub),
        redirect_port=_port(sub),
        token_endpoint_auth_method=sub.choice("token_endpoint_auth_method", TOKEN_ENDPOINT_AUTH_METHODS),
    )
    if oauth.client_secret is not None and oauth.client_id is None:
        sub.add("client_secret", "needs client_id: a client secret belongs to a pre-registered client")
    if oauth.token_endpoint_auth_method in ("client_secret_basic", "client_secret_post") and (
        oauth.client_secret is None
    ):
        sub.add("token_endpoint_auth_method", f"{oauth.token_endpoint_auth_method} needs client_secret")
    r.problems += sub.problems
    return oauth


def _client_secret(r: _Reader) -> str | None:
    """A client secret is written as one `${VAR}` reference: the secret itself never goes in the file."""
    value = r.string("client_secret")
    if value is None or _VAR_REF.fullmatch(value):
        return value
    var = re.sub(r"\W", "_", f"{r.server}_client_secret").upper()
    said = "looks like a secret" if not references(value) else "mixes a ${VAR} reference with text"
    r.add(
        "client_secret",
        f"{said}, and emceepee keeps secrets out of its config file: write client_secret = "
        f'"${{{var}}}" and set {var} in the "env" block of emceepee\'s entry in your MCP host\'s config',
    )
    return None


def _metadata_url(r: _Reader) -> str | None:
    """A Client ID Metadata Document's URL: https, a host, a path beyond `/`, no fragment."""
    value = r.string("client_metadata_url")
    if value is None:
        return None
    try:
        parts = urlsplit(value)
        ok = parts.scheme == "https" and bool(parts.hostname) and parts.path not in ("", "/")
    except ValueError:  # a bad port or IPv6 address
        ok = False
    if not ok or parts.fragment or not value.isprintable() or " " in value:
        r.add(
            "client_metadata_url",
            "must be an https URL with a path, where your client's metadata document is served, like "
            f'"https://example.com/client.json" (got {reprlib.repr(value)})',
        )
        return None
    return value


def _port(r: _Reader) -> int | None:
    value = r.table.get("redirect_port")
    if value is None or (type(value) is int and 1 <= value <= 65535):
        return value
    r.add("redirect_port", f"must be a port number from 1 to 65535 (got {reprlib.repr(value)})")
    return None


def _check_remote(table: Mapping[str, object], r: _Reader) -> None:
    """`transport` and `oauth` belong to a `url` server; an Authorization header and `oauth` exclude
    each other (a static token is never replaced by a sign-in)."""
    if "command" in table and "url" not in table:
        for key in ("transport", "oauth"):
            if key in table:
                local = "a 'command' server runs locally"
                r.add(key, f"is only for a remote server (one with a 'url'); {local}: remove '{key}'")
    headers = table.get("headers")
    named = [key for key in headers if key.lower() == "authorization"] if isinstance(headers, dict) else []
    if named and "oauth" in table:
        r.add(
            "oauth",
            f"cannot go with the {named[0]} header: a server given a token in a header is never signed "
            "in to; remove the header to sign in, or the oauth table to keep the token",
        )


def _name_problems(name: str) -> list[str]:
    if not _NAME.fullmatch(name):
        return ["bad name: use 1-64 letters, digits, '_' or '-', starting with a letter or digit"]
    if name.lower() == RESERVED_NAME:
        return [f"bad name: '{name}' is reserved (emceepee's own questions, such as approvals, carry it)"]
    return ["bad name: '__' is reserved (it joins server and tool names)"] if "__" in name else []


def _ref_problems(spec: ServerSpec, environ: Mapping[str, str] | None) -> list[ConfigProblem]:
    """`${VAR}` references that are malformed, or (given an environ) not set in it."""
    try:
        expand_spec(spec, environ)
    except RefError as exc:
        return [ConfigProblem(spec.name, exc.field, f"{exc.reason}; {exc.hint}")]
    return []


def _unknown(server: str | None, name: str, known: tuple[str, ...], what: str = "field") -> ConfigProblem:
    close = difflib.get_close_matches(name.rpartition(".")[2], known, n=1)
    suggestion = f"did you mean '{close[0]}'?" if close else f"known: {', '.join(known)}"
    return ConfigProblem(server, name, f"unknown {what}; {suggestion}")


def _all_str(value: object, kind: type[list[Any]] | type[dict[str, Any]]) -> bool:
    """`value` is a TOML array (or table) whose every item (or value) is a string."""
    if not isinstance(value, kind):
        return False
    items = cast(dict[str, object], value).values() if isinstance(value, dict) else cast(list[object], value)
    return all(isinstance(item, str) for item in items)
