"""When two hosts' sessions in the fleet may share one backend: the sharing key.

A backend instance is shared exactly when the process it would start is the same, so sharing
never changes what a backend sees: the same table in the config (after `[defaults] pass_env`), and,
filled in from each host's environment and working directory (backends/launch.py), the same
command as it would be run, args, environment (what backends/environment.py lets through, then the
table's `env` with `${VAR}` filled in) and working directory; for a remote backend the same URL,
headers, proxies and CA (backends/connect.py's `network`); and the same configured roots (its own,
else `[defaults] roots`) as resolved where each host is. Claude Desktop's windows share every
backend; two sessions in one project share; sessions in different projects get their own
instance of each server that takes the host's working directory (no absolute `cwd` of its own,
or a relative root) and share the rest. `per_host = true` gives every host session its own
instance.

The key is a digest: what went into it (secrets among it) is never kept, shown nor logged.
A table whose `${VAR}` cannot be filled in from a host's environment is keyed to that session
alone: its backend fails to start, saying why, for that host only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass

from emceepee_cli.backends.connect import proxies, trusted_ca
from emceepee_cli.backends.environment import backend_env
from emceepee_cli.backends.launch import Launch
from emceepee_cli.config import ServerSpec, root_uris
from emceepee_cli.errors import ConfigError

SHOWN_DIGITS = 12  # of the digest, in `fleet status`


@dataclass(frozen=True)
class SharingKey:
    """Which backend instance a session's server is: equal keys share one process."""

    server: str
    digest: str
    personal: bool = False  # keyed to one session (`per_host`, or unstartable for it): never shared

    def __str__(self) -> str:
        return f"{self.server}@{self.digest[:SHOWN_DIGITS]}"


def sharing_key(
    spec: ServerSpec, launch: Launch | None, session: str, default_roots: tuple[str, ...] = ()
) -> SharingKey:
    """The key of `spec` (as the session's registry starts it) for a host whose environment and
    working directory are `launch` (None: the fleet's own, as in-process), whose config's
    `[defaults] roots` are `default_roots`."""
    base = None if launch is None else launch.base
    roots = [uri for uri, _ in root_uris(spec.roots or default_roots, base)]
    parts: dict[str, object] = {"table": spec.to_toml(), "roots": roots}
    if spec.per_host:
        parts["session"] = session
    try:
        parts["process"] = _what_runs(spec, launch)
    except ConfigError:
        parts["session"] = session  # it cannot start for this host: nobody else's concern
    encoded = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()
    return SharingKey(spec.name, hashlib.sha256(encoded).hexdigest(), "session" in parts)


def _what_runs(spec: ServerSpec, launch: Launch | None) -> dict[str, object]:
    """What the backend would be started as, with every `${VAR}` filled in."""
    environ = None if launch is None else launch.environ
    full = spec.expanded(environ)
    if full.remote:
        seen = os.environ if environ is None else environ
        return {"url": full.url, "headers": full.headers, "proxies": proxies(seen), "ca": trusted_ca(seen)}
    assert full.command is not None
    cwd, command = full.cwd, full.command
    if launch is not None:
        cwd = launch.cwd_for(cwd)
        command = launch.command_for(command, cwd)
    env = backend_env(full.env, full.pass_env, environ)
    found = shutil.which(command, path=env.get("PATH")) if "/" not in command else command
    return {"command": found or command, "args": full.args, "env": env, "cwd": cwd}
