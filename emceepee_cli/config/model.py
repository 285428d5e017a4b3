"""The config's shape: one `ServerSpec` per backend, the `Defaults`, and what was wrong with the file.

`Config.servers` keeps `${VAR}` unexpanded (secrets are neither shown nor re-saved);
`ServerSpec.expanded()` fills them in for spawning (see expand.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from emceepee_cli.config.expand import RefError, expand
from emceepee_cli.errors import ConfigError, NotFound

Policy = Literal["auto", "forward", "park"]
RemoteTransport = Literal["http", "sse"]
Protocol = Literal["legacy", "modern", "auto"]
Expose = Literal["meta", "direct", "both"]
ServerChanges = Literal["approve", "allow", "deny"]

POLICIES: tuple[str, ...] = ("auto", "forward", "park")
PROTOCOLS: tuple[str, ...] = ("legacy", "modern", "auto")
EXPOSES: tuple[str, ...] = ("meta", "direct", "both")
# Who may accept an approval: a person through the host's own prompt, a person at a terminal
# (`emceepee answer`), or the model itself through the answer tools. Anyone may decline one.
APPROVERS: tuple[str, ...] = ("host", "cli", "model")
# What the model's add_server / remove_server do: wait for a person's approval, go ahead, or refuse.
SERVER_CHANGES: tuple[str, ...] = ("approve", "allow", "deny")
# How a `url` backend is reached: Streamable HTTP (the default), or the legacy HTTP+SSE transport.
REMOTE_TRANSPORTS: tuple[str, ...] = ("http", "sse")
# How a pre-registered OAuth client proves itself at the token endpoint.
TOKEN_ENDPOINT_AUTH_METHODS: tuple[str, ...] = ("client_secret_basic", "client_secret_post", "none")
# A field whose key in the [servers.NAME] table is another word (`transport` is the property).
TOML_KEYS = {"remote_transport": "transport"}


@dataclass(frozen=True)
class OAuthSpec:
    """The [servers.NAME.oauth] table: how emceepee signs in to a remote backend (emceepee_cli/signin/
    uses it). Every field is optional: without any, the client registers itself dynamically."""

    client_id: str | None = None  # a pre-registered client
    client_secret: str | None = field(default=None, repr=False)  # always a ${VAR} reference in the file
    client_metadata_url: str | None = None  # a Client ID Metadata Document: https, a non-root path
    redirect_port: int | None = None  # the loopback port of the redirect (else a random one)
    token_endpoint_auth_method: str | None = None  # client_secret_basic, client_secret_post or none

    def to_toml(self) -> dict[str, Any]:
        """The table as written: the fields that are set."""
        return {f.name: value for f in fields(self) if (value := getattr(self, f.name)) is not None}


@dataclass(frozen=True)
class ServerSpec:
    """One backend: a local command (stdio) or a remote URL (Streamable HTTP, or legacy SSE)."""

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
    pass_env: tuple[str, ...] = ()  # more of emceepee's variables for a stdio backend (NAME or PREFIX*)
    # How results that drive the workflow are followed (None: the [defaults] value), and which
    # tools may run at all, or only once approved (see calls/policy.py).
    follow_next_tool: bool | None = None
    max_chain_depth: int | None = None
    auto_resume: bool | None = None
    auto_resume_limit: int | None = None
    auto_resume_interval_ms: int | None = None
    confirm_destructive: bool | None = None
    tools: dict[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])  # allow, deny
    confirm: tuple[str, ...] = ()
    approval_by: tuple[str, ...] | None = None  # else [defaults] approval_by
    roots: tuple[str, ...] = ()  # directories this backend sees as its roots; else the host's
    expose: Expose | None = None  # else [defaults] expose
    remote_transport: RemoteTransport = "http"  # the `transport` key: how a `url` is reached
    oauth: OAuthSpec | None = None  # how to sign in to a `url` backend (None: the defaults)
    per_host: bool = False  # in the fleet: never shared between hosts (it keeps one session's state)

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        return self.remote_transport if self.url is not None else "stdio"

    @property
    def remote(self) -> bool:
        """Reached over HTTP (Streamable HTTP or SSE), not a process of ours."""
        return self.url is not None

    def to_toml(self) -> dict[str, Any]:
        """The [servers.NAME] table: non-default fields only, values as written (unexpanded)."""
        blank = ServerSpec(self.name)
        return {
            TOML_KEYS.get(f.name, f.name): _toml_value(value)
            for f in fields(self)
            if f.name != "name" and (value := getattr(self, f.name)) != getattr(blank, f.name)
        }

    def expanded(self, environ: Mapping[str, str] | None = None) -> ServerSpec:
        """A copy with `${VAR}` filled in from `environ` (default os.environ) and `~` expanded."""
        try:
            return expand_spec(self, os.environ if environ is None else environ)
        except RefError as exc:
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
    pass_env: tuple[str, ...] = ()  # passed to every stdio backend, beyond backends/environment.py's list
    follow_next_tool: bool = True  # call the tool a result suggests (_meta.nextTool) on the same server
    max_chain_depth: int = 5  # calls in one chain, the first included
    auto_resume: bool = False  # re-issue a call whose result carries nextResumeToken until it has none
    auto_resume_limit: int = 50  # re-issues per call
    auto_resume_interval_ms: int = 1000  # between re-issues
    confirm_destructive: bool = False  # ask before a tool annotated destructiveHint runs
    approval_by: tuple[str, ...] = ("host", "cli")  # who may accept an approval: by default a person
    # add_server / remove_server from the model: a person approves (never the model), or allow, or deny
    model_adds_servers: ServerChanges = "approve"
    roots: tuple[str, ...] = ()  # backends' roots when neither their own nor the host's are given
    expose: Expose = "meta"  # backend tools on the host's tools/list: meta-tools only, directly, or both
    direct_name_max: int = 64  # longest `server__tool` name in direct mode (model APIs allow 64)
    log_backups: int = 1  # rotated files kept of each backend's stderr log (NAME.log.1 … .N)


@dataclass(frozen=True)
class FleetSettings:
    """The [fleet] table: whether `serve` goes through the per-user fleet
    (emceepee_cli/fleet/front.py), and how long the fleet stays once its last host has gone."""

    enabled: bool | None = None  # None: not said, so on (unless EMCEEPEE_FLEET=0)
    idle_exit_s: float = 600.0  # `idle_exit = "10m"`; 0: the fleet exits with its last host


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong in the file; `server`/`field` are None when it is not about one."""

    server: str | None
    field: str | None
    message: str
    file: str = "config.toml"  # the name of the file it is in (load_config sets it)

    def __str__(self) -> str:
        # A name with a newline or a control character is shown escaped, on one line.
        shown = self.server if self.server is None or self.server.isprintable() else repr(self.server)[1:-1]
        where = [f"server '{shown}'"] if shown is not None else []
        where += [f"field '{self.field}'"] if self.field is not None else []
        return ": ".join([self.file, *([", ".join(where)] if where else []), self.message])


@dataclass(frozen=True)
class Config:
    """A loaded config file: what it says, and what was wrong with it."""

    path: Path
    defaults: Defaults
    servers: dict[str, ServerSpec]
    problems: tuple[ConfigProblem, ...]
    fleet: FleetSettings = field(default_factory=FleetSettings)

    def server(self, name: str) -> ServerSpec:
        if name in self.servers:
            return self.servers[name]
        hint = f"Add it with: emceepee servers add {name} -- <command> [args…]"
        raise unknown_server(name, self.servers, hint)


def forwarding_policy(spec: ServerSpec | None, defaults: Defaults, kind: str) -> Policy:
    """How a `kind` question of this server may reach the host: its own setting, else the default."""
    own = None if spec is None else spec.sampling if kind == "sampling" else spec.elicitation
    return own or (defaults.sampling if kind == "sampling" else defaults.elicitation)


def _toml_value(value: Any) -> Any:
    if isinstance(value, OAuthSpec):
        return value.to_toml()
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, dict):
        return {key: _toml_value(item) for key, item in value.items()}
    return value


def exposure(spec: ServerSpec, defaults: Defaults) -> Expose:
    """How this server's tools reach the host: its own `expose`, else the default."""
    return spec.expose or defaults.expose


@dataclass(frozen=True)
class PathBase:
    """Where a path the config names starts, when it is relative or begins with `~`: emceepee's own
    working directory and home (None), or in the fleet a host's (backends/launch.py)."""

    cwd: str | None = None
    environ: Mapping[str, str] | None = field(default=None, repr=False)  # its HOME is `~`

    def home(self, path: str) -> str:
        """`path` with a leading `~` (or `~/`) as the home: the environ's HOME, else emceepee's."""
        home = None if self.environ is None else self.environ.get("HOME")
        if home is None or not (path == "~" or path.startswith("~/")):
            return os.path.expanduser(path)  # emceepee's HOME, or `~user`: the same for every host
        return (home.rstrip("/") or "/") + path[1:]

    def directory(self, path: str) -> Path:
        """`path` (a configured root) as an absolute path, symlinks resolved."""
        found = Path(self.home(path))
        return (Path(self.cwd) / found if self.cwd is not None else found).resolve()


def root_uris(paths: tuple[str, ...], base: PathBase | None = None) -> list[tuple[str, str]]:
    """(file:// URI, name) of each configured root directory, `~` expanded and a relative one
    taken from `base` (default emceepee's)."""
    out = []
    for path in paths:
        resolved = (base or PathBase()).directory(path)
        out.append((resolved.as_uri(), resolved.name or str(resolved)))
    return out


def unknown_server(name: str, known: Mapping[str, object], hint: str) -> NotFound:
    return NotFound(f"Unknown server '{name}'. Known: {', '.join(known) or '(none)'}.", hint=hint)


def expand_spec(spec: ServerSpec, environ: Mapping[str, str] | None) -> ServerSpec:
    """Expand every field that may hold `${VAR}`; with environ None, only check the syntax."""
    # Only a leading `~` is the home (the host's HOME, in the fleet): `--repo=~/x` is passed as written.
    home = PathBase(environ=environ).home
    args = tuple(home(expand(f"args[{i}]", arg, environ)) for i, arg in enumerate(spec.args))
    env = {key: expand(f"env.{key}", value, environ) for key, value in spec.env.items()}
    headers = {key: expand(f"headers.{key}", value, environ) for key, value in spec.headers.items()}
    url = None if spec.url is None else expand("url", spec.url, environ)
    cwd = None if spec.cwd is None else home(expand("cwd", spec.cwd, environ))
    oauth = None if spec.oauth is None else _expand_oauth(spec.oauth, environ)
    return replace(spec, args=args, env=env, headers=headers, url=url, cwd=cwd, oauth=oauth)


def _expand_oauth(oauth: OAuthSpec, environ: Mapping[str, str] | None) -> OAuthSpec:
    """The client's id and secret with `${VAR}` filled in (the other fields are taken as written)."""
    client_id = None if oauth.client_id is None else expand("oauth.client_id", oauth.client_id, environ)
    secret = oauth.client_secret
    client_secret = None if secret is None else expand("oauth.client_secret", secret, environ)
    return replace(oauth, client_id=client_id, client_secret=client_secret)
