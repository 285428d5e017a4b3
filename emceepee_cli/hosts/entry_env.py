"""The variables MCP hosts give emceepee: the `env` block of emceepee's entry in each host's config.

A host starts emceepee with that block in its environment, and `import` moves a server's secrets
there (emceepee's config keeps `${VAR}`). A terminal has none of them, so the commands that start
backends, or say whether they can start (`tools`, `call`, `servers list/show/add`), take each
`${VAR}` the config names and their own environment lacks from here (`filled`), and say from which
file, never the value. A host file that cannot be read is passed over, with the reason. `doctor`
reads the same blocks for its host checks (hosts/doctor.py): where two hosts set one variable,
both take the later host's value.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emceepee_cli.config.expand import references
from emceepee_cli.errors import ConfigError
from emceepee_cli.hosts import catalog

EXPANDED = ("env", "headers", "args", "url", "cwd")  # the fields of a [servers.NAME] that `${VAR}` fills


@dataclass(frozen=True)
class HostVar:
    """A variable an MCP host gives emceepee, and the file that says so."""

    name: str
    value: str = field(repr=False)
    file: Path


@dataclass
class HostVars:
    """What the hosts' files give emceepee, which of them have an emceepee entry, and the problem of
    each file that could not be read."""

    found: dict[str, HostVar] = field(default_factory=dict[str, HostVar])
    files: list[Path] = field(default_factory=list[Path])
    unreadable: list[str] = field(default_factory=list[str])


def read() -> HostVars:
    """Every installed host's variables for emceepee, in the catalog's order (a later host wins)."""
    from emceepee_cli.hosts import config_file

    out = HostVars()
    for host in catalog.HOSTS.values():
        path = host.path()
        try:
            doc = config_file.read(path)
        except ConfigError as exc:
            out.unreadable.append(exc.message)
            continue
        entry = emceepee_entry(doc.data, host)
        if entry is None:
            continue
        out.files.append(path)
        for name, value in usable(entry.get("env")).items():
            out.found[name] = HostVar(name, value, path)
    return out


def emceepee_entry(data: Mapping[str, Any], host: catalog.Host) -> dict[str, Any] | None:
    """The first entry of a host's file that starts emceepee, as `doctor` finds it."""
    servers = data.get(host.servers_key)
    if not isinstance(servers, dict):
        return None
    for name, entry in servers.items():
        if isinstance(entry, dict) and catalog.is_emceepee(str(name), entry):
            return entry
    return None


def usable(env: object) -> dict[str, str]:
    """The variables of an `env` block a process can be given: string values with no NUL byte,
    under names that are names (not empty, no '=' or NUL)."""
    if not isinstance(env, dict):
        return {}
    return {
        str(name): value
        for name, value in env.items()
        if isinstance(value, str) and "\0" not in value and str(name) and not set(str(name)) & {"=", "\0"}
    }


def wanted(config: Path) -> list[str]:
    """The `${VAR}` names the config's servers refer to, in order, each once. A config that cannot
    be read names none: the command's own load says what is wrong with it."""
    from emceepee_cli.config import read_toml

    try:
        servers = read_toml(config).get("servers")
    except ConfigError:
        return []
    tables = servers.values() if isinstance(servers, dict) else ()
    return list(dict.fromkeys(name for table in tables for name in referred(table)))


def referred(table: object) -> list[str]:
    """The `${VAR}` names one [servers.NAME] table refers to where they are expanded."""
    if not isinstance(table, dict):
        return []
    return [name for key in EXPANDED for text in _strings(table.get(key)) for name in references(text)]


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [item for item in items if isinstance(item, str)]


@dataclass(frozen=True)
class Filling:
    used: list[HostVar]  # taken from a host's file
    unreadable: list[str]  # host files passed over, each with its problem


@contextlib.contextmanager
def filled(config: Path) -> Iterator[Filling]:
    """This process's environment, for a while, with each `${VAR}` the config names and it lacks
    set from the hosts' entries (backends started meanwhile expand from it). The hosts' files are
    read only when something is missing."""
    missing = [name for name in wanted(config) if name not in os.environ]
    if not missing:
        yield Filling([], [])
        return
    hosts = read()
    used = [hosts.found[name] for name in missing if name in hosts.found]
    os.environ.update({var.name: var.value for var in used})
    try:
        yield Filling(used, hosts.unreadable)
    finally:
        for var in used:
            os.environ.pop(var.name, None)
