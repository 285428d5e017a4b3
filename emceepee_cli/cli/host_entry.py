"""emceepee's entry in an MCP host's config file, shared by `install` and `import`: which host and
file, the entry that starts this very emceepee, and the file's diff with its secrets hidden.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from emceepee_cli.hosts.catalog import Host
    from emceepee_cli.hosts.config_file import HostFile

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
