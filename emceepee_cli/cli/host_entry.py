"""emceepee's entry in an MCP host's config file, shared by `install` and `import`: which host and
file, the entry that starts this very emceepee, and the file's diff with its secrets hidden.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emceepee_cli.hosts.catalog import Host
    from emceepee_cli.hosts.config_file import HostFile, Uneditable

_PAIR = re.compile(r'("(?P<key>[^"\\]*)"\s*:\s*)"(?P<value>(?:\\.|[^"\\])*)"')


def masked_diff(diff: str) -> str:
    """A diff with every `"KEY": "value"` whose value looks like a secret shown as `<hidden>`."""
    from emceepee_cli.hosts.importing import looks_secret

    def one(match: re.Match[str]) -> str:
        if looks_secret(match.group("key"), match.group("value")):
            return f'{match.group(1)}"<hidden>"'
        return match.group(0)

    return _PAIR.sub(one, diff)


def host_target(host_name: str, file: Path | None) -> tuple[Host, Path]:
    """The host named `host_name` and its config file (`file`, else where the host keeps it)."""
    from emceepee_cli.hosts import catalog

    host = catalog.find(host_name)
    return host, (file.expanduser() if file else host.path())


def _serve_command(config: Path | None) -> list[str]:
    from emceepee_cli.hosts import catalog

    command = catalog.serve_command()
    return [*command, "--config", str(config.expanduser().absolute())] if config else command


def emceepee_entry(host: Host, doc: HostFile, name: str, config: Path | None) -> tuple[dict[str, Any], str]:
    """Put emceepee's entry into `doc` (kept as it is but for how it starts); (the entry, the action)."""
    servers = doc.servers(host.servers_key)
    existing = servers.get(name)
    entry = host.stdio_entry(_serve_command(config), existing if isinstance(existing, dict) else None)
    servers[name] = entry
    return entry, "unchanged" if existing == entry else ("updated" if existing is not None else "added")


def by_hand(
    exc: Uneditable,
    host: Host,
    path: Path,
    name: str,
    adding: tuple[dict[str, Any] | None, Path | None] | None,
) -> Uneditable:
    """`exc` (the host's file cannot be edited) with what to do by hand: with `adding` (the entry
    meant, if it was made, and the config it names), the entry to paste; else what to delete."""
    from emceepee_cli.hosts.config_file import Uneditable

    if adding is None:
        todo = f'Or remove emceepee by hand: delete the "{name}" entry of "{host.servers_key}" in {path}.'
        return Uneditable(exc.message, hint=f"{exc.hint}\n{todo}")
    entry, config = adding
    entry = dict(entry or host.stdio_entry(_serve_command(config)))
    note = ""
    if isinstance(entry.get("env"), dict) and entry["env"]:
        entry["env"] = {key: "<hidden>" for key in entry["env"]}
        note = ' (and keep the values of the "env" block your entry has now)'
    pasted = json.dumps({name: entry}, indent=2, ensure_ascii=False)[1:-1].strip("\n")
    todo = f'Or add emceepee by hand: put this entry in the "{host.servers_key}" object of {path}{note}:'
    return Uneditable(exc.message, hint=f"{exc.hint}\n{todo}\n\n{pasted}")
