"""`emceepee install HOST` and `emceepee import HOST`: emceepee in a host's config, and the host's
servers in emceepee's.

Both change only the members of the host's file that they must (emceepee's entry, and the servers
`import --replace` moved): the rest of the file, comments and indentation included, stays byte for
byte, so the diff shows only that. The file is backed up next to itself
(`NAME.YYYYmmdd-HHMMSS.bak`) and replaced atomically. Running either again changes nothing.
`--dry-run` shows the diff and writes nothing. A file that cannot be edited safely (not JSON, not
an object, a key written twice) is left alone, and `install` prints the entry to paste. A secret
is never printed: values that look like one show as `<hidden>` in diffs, and as their `${VAR}` in
tables.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from emceepee_cli.cli.framework.options import ConfigOpt, JsonOpt
from emceepee_cli.cli.host_entry import by_hand, emceepee_entry, host_target, masked_diff
from emceepee_cli.cli.terminal import render

if TYPE_CHECKING:
    from emceepee_cli.hosts.catalog import Host

HostArg = Annotated[
    str,
    typer.Argument(
        metavar="HOST",
        help="claude-desktop (or claude), claude-code, cursor, vscode, windsurf, gemini-cli, lm-studio.",
        show_default=False,
    ),
]
FileOpt = Annotated[
    Path | None,
    typer.Option(
        "--file", help="The host's config file (default: where the host keeps it).", show_default=False
    ),
]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Show the change as a diff; write nothing.")]
NameOpt = Annotated[str, typer.Option("--name", help="The entry's name in the host's config.")]


def _shown_entry(entry: dict[str, Any]) -> dict[str, Any]:
    out = dict(entry)
    if isinstance(out.get("env"), dict):
        out["env"] = {k: "<hidden>" for k in out["env"]}
    return out


def install(
    host: HostArg,
    file: FileOpt = None,
    uninstall: Annotated[bool, typer.Option("--uninstall", help="Remove emceepee's entry instead.")] = False,
    dry_run: DryRunOpt = False,
    name: NameOpt = "emceepee",
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="Have the host start emceepee with this config file.", show_default=False
        ),
    ] = None,
    json: JsonOpt = False,
) -> None:
    """Add emceepee to an MCP host's config (or remove it).

    With --uninstall, its entry is removed.
    The entry starts this very emceepee by the absolute path of its executable, so the host
    needs no PATH. Other keys of the file, and of an existing entry (its "env" above all), are
    kept; the file is backed up first; running it again changes nothing.
    """
    from emceepee_cli.hosts import config_file

    chosen, path = host_target(host, file)
    entry: dict[str, Any] | None = None
    kept_env: list[str] = []
    try:
        doc = config_file.read(path)
        if uninstall:
            servers = doc.servers(chosen.servers_key) if doc.exists else {}
            removed = servers.pop(name, None)
            action = "removed" if removed is not None else "absent"
            if isinstance(removed, dict) and isinstance(removed.get("env"), dict):
                kept_env = sorted(removed["env"])
        else:
            entry, action = emceepee_entry(chosen, doc, name, config)
        diff = masked_diff(doc.diff()) if action not in ("unchanged", "absent") else ""
    except config_file.Uneditable as exc:
        raise by_hand(exc, chosen, path, name, None if uninstall else (entry, config)) from None
    backup = config_file.write(doc) if diff and not dry_run else None
    if json:
        out: dict[str, Any] = {"host": chosen.key, "file": str(path), "action": action, "dry_run": dry_run}
        out |= {"backup": str(backup) if backup else None, "diff": diff}
        if entry is not None:
            out["entry"] = _shown_entry(entry)
        render.as_json(out | {"removed_env": kept_env})
        return
    _say_installed(chosen, path, action, diff, backup, dry_run)
    if kept_env and not dry_run:
        render.warn(f"Its env block ({', '.join(kept_env)}) went with it; the backup {backup} keeps it.")


def _say_installed(
    host: Host, path: Path, action: str, diff: str, backup: Path | None, dry_run: bool
) -> None:
    if dry_run and diff:
        render.line(diff.rstrip("\n"))
        render.note(f"(dry run: {path} was not changed)")
        return
    if action == "unchanged":
        render.line(f"emceepee is already in {host.title}'s config {path}; nothing changed.")
        return
    if action == "absent":
        render.line(f"{host.title}'s config {path} has no emceepee entry; nothing changed.")
        return
    verb = {
        "added": "Added emceepee to",
        "updated": "Updated emceepee's entry in",
        "removed": "Removed emceepee from",
    }
    saved = f" (backup: {backup})" if backup else " (a new file)"
    render.line(f"{verb[action]} {host.title}'s config {path}{saved}.")
    render.line(f"Restart {host.title} (quit it fully) to pick up the change.")


def import_(
    host: HostArg,
    file: FileOpt = None,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Then leave only emceepee in the host's config (after a backup)."),
    ] = False,
    dry_run: DryRunOpt = False,
    name: NameOpt = "emceepee",
    config: ConfigOpt = None,
    json: JsonOpt = False,
) -> None:
    """Copy the servers of an MCP host's config into emceepee's.

    Local and remote (Streamable HTTP) servers are copied; emceepee itself, names already in
    emceepee's config, and servers only the host can start (SSE, ${input:…}) are skipped, with
    the reason. A value that looks like a secret goes to emceepee's config as ${VAR}, and the
    value to the "env" block of emceepee's entry in the host's config (which is added if missing).
    With --replace, the servers that moved are then removed from the host's config.
    """
    from emceepee_cli.cli import moving

    result = moving.run(host, file, replace=replace, dry_run=dry_run, name=name, config=config)
    if json:
        render.as_json(result)
        return
    moving.say(result)
