"""Writing the config file: add, replace or remove one [servers.NAME] table, keeping the rest.

Every read-modify-write holds an exclusive lock on a sibling `config.toml.lock`, so two writers
(two `emceepee servers add`, or the CLI and a serve's `add_server`) never lose each other's
servers; saving rewrites the file atomically (temp file, fsync, replace); comments in a
hand-edited file are lost.
"""

from __future__ import annotations

import contextlib
import os
import reprlib
import tempfile
from pathlib import Path
from typing import Any, cast

import tomli_w

from emceepee_cli import locking, paths
from emceepee_cli.config.load import PERMISSION_HINT, check_spec, read_toml
from emceepee_cli.config.model import ServerSpec, unknown_server
from emceepee_cli.errors import ConfigError, UsageError


def add_server(spec: ServerSpec, path: Path | None = None, *, replace: bool = False) -> Path:
    """Add (or with `replace`, overwrite) [servers.NAME], keeping the rest of the file."""
    path = paths.config_path(path)
    check_spec(spec)
    with locking.locked(path):
        doc = read_toml(path)
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
        servers = _servers_table(read_toml(path), path)
        raise unknown_server(name, servers, "See them with: emceepee servers list")
    return path


def discard_server(name: str, path: Path | None = None) -> bool:
    """Delete [servers.NAME] if the file has it; whether it did."""
    path = paths.config_path(path)
    if not path.exists():
        return False  # nothing to remove, and no folder or lock file to create
    with locking.locked(path):
        doc = read_toml(path)
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
        raise ConfigError(f"Cannot write {path}: {exc.strerror}.", hint=PERMISSION_HINT) from None
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
