"""Writing the config file: add, replace or remove one [servers.NAME] table, keeping the rest.

Only that table's text changes (config/edit.py): the user's comments, order, layout and line
endings stay as they were. Every read-modify-write holds an exclusive lock on a sibling
`config.toml.lock`, so two writers (two `emceepee servers add`, or the CLI and a serve's
`add_server`) never lose each other's servers. Saving is atomic (temp file, fsync, replace), the
file is 0600 (it may hold a secret), and a link to it stays a link: the file it points to is
replaced. An editor does not take the lock: if the file changed since it was read, the edit
starts again from the new text, so a save made meanwhile is not lost.
"""

from __future__ import annotations

import contextlib
import os
import reprlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from emceepee_cli import locking, paths
from emceepee_cli.config.edit import Unedited, drop_server, put_server
from emceepee_cli.config.load import PERMISSION_HINT, check_spec, parse_server, parse_toml, read_toml
from emceepee_cli.config.model import PathBase, ServerSpec, unknown_server
from emceepee_cli.errors import ConfigError, UsageError

# How often an edit starts again because the file changed under it before giving up.
EDIT_ATTEMPTS = 5


def add_server(
    spec: ServerSpec, path: Path | None = None, *, replace: bool = False, base: PathBase | None = None
) -> Path:
    """Add (or with `replace`, overwrite) [servers.NAME], keeping the rest of the file; its relative
    roots are checked from `base` (default emceepee's working directory)."""
    path = paths.config_path(path)
    check_spec(spec, base)

    def put(text: str, doc: dict[str, Any]) -> str:
        servers = _servers_table(doc, path)
        if spec.name in servers and not replace:
            hint = (
                f"Add --replace to replace it (emceepee servers add {spec.name} --replace …), "
                f"or remove it first: emceepee servers remove {spec.name}"
            )
            raise UsageError(f"Server '{spec.name}' already exists in {path}.", hint=hint)
        return _edited(path, lambda: put_server(text, doc, spec.name, _table(spec, servers.get(spec.name))))

    _edit(path, put)
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

    def drop(text: str, doc: dict[str, Any]) -> str | None:
        if name not in _servers_table(doc, path):
            return None
        return _edited(path, lambda: drop_server(text, doc, name))

    return _edit(path, drop)


def _table(spec: ServerSpec, old: object) -> dict[str, Any]:
    """The table to write for `spec`: its own fields, and the keys of the table it replaces whose
    removal would change nothing (`protocol = "legacy"` written out, say), so they stay."""
    table = spec.to_toml()
    meant, _ = parse_server(spec.name, table)
    for key, value in cast(dict[str, Any], old).items() if isinstance(old, dict) else ():
        if key not in table and parse_server(spec.name, {**table, key: value})[0] == meant:
            table[key] = value
    return table


def _edited(path: Path, make: Callable[[], str]) -> str:
    try:
        return make()
    except Unedited as exc:
        raise ConfigError(f"In {path}, {exc.message}", hint=exc.hint) from None


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


def _edit(path: Path, change: Callable[[str, dict[str, Any]], str | None]) -> bool:
    """Apply `change` (the file's text and what it says → the new text, or None for no change) under
    the lock, and save the result; whether the file changed."""
    with locking.locked(path):
        for _ in range(EDIT_ATTEMPTS):
            before = _read(path)
            text = _text(before, path)
            after = change(text, parse_toml(text, path))
            if after is None or after == text:
                return False
            if _replace(path, before, after):
                return True
    raise ConfigError(
        f"{path} kept changing while emceepee was editing it ({EDIT_ATTEMPTS} tries); nothing was written.",
        hint="Finish saving it in your editor, then run the command again.",
    )


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"Cannot read {path}: {exc.strerror}.", hint=PERMISSION_HINT) from None


def _text(raw: bytes | None, path: Path) -> str:
    try:
        return "" if raw is None else raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"Cannot read {path}: {exc}.", hint=PERMISSION_HINT) from None


def _replace(path: Path, before: bytes | None, text: str) -> bool:
    """Replace the file atomically with `text`, unless it is no longer `before` (someone saved it
    meanwhile); whether it did. Readers see the old file or the new one, never a part."""
    target = Path(os.path.realpath(path))
    try:
        paths.ensure_private_dir(target.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise ConfigError(f"Cannot write {path}: {exc.strerror}.", hint=PERMISSION_HINT) from None
    try:
        with os.fdopen(fd, "wb") as fp:  # mkstemp made it 0600, and a umask can only narrow that
            fp.write(text.encode("utf-8"))
            fp.flush()
            os.fsync(fp.fileno())
        if _read(path) != before:
            os.unlink(tmp)
            return False
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True
