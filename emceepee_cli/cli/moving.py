"""What `emceepee import HOST` does, and how it says so (the plan itself is `hosts/importing.py`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from emceepee_cli.cli.terminal import render

if TYPE_CHECKING:
    from emceepee_cli.config import ServerSpec
    from emceepee_cli.hosts.catalog import Host


def _same(spec: ServerSpec | None, entry: Any, host: Host) -> bool:
    """The host's entry starts what emceepee's server of that name starts."""
    if spec is None or not isinstance(entry, dict):
        return False
    url, _ = host.url_of(entry)
    if url is not None:
        return url == spec.url
    args = [str(a) for a in entry.get("args") or []]
    return entry.get("command") == spec.command and args == list(spec.args)


def run(
    host_name: str, file: Path | None, *, replace: bool, dry_run: bool, name: str, config: Path | None
) -> dict[str, Any]:
    from emceepee_cli import config as config_mod
    from emceepee_cli import paths
    from emceepee_cli.cli.host_entry import emceepee_entry, host_target, masked_diff
    from emceepee_cli.cli.server_rows import raw_servers, server_row
    from emceepee_cli.errors import NotFound, UsageError
    from emceepee_cli.hosts import config_file, importing

    host, path = host_target(host_name, file)
    doc = config_file.read(path)
    if not doc.exists:
        raise NotFound(
            f"{host.title}'s config {path} does not exist: there is nothing to import.",
            hint="If the host keeps it elsewhere, give it with --file PATH.",
        )
    entries = dict(doc.servers(host.servers_key))
    config_path = paths.config_path(config)
    loaded = config_mod.load_config(config_path)
    known = {n: loaded.servers.get(n) for n in raw_servers(config_path)}
    ours = entries.get(name)
    env = ours.get("env") if isinstance(ours, dict) and isinstance(ours.get("env"), dict) else {}
    plan = importing.plan(host, entries, known, env)  # type: ignore[arg-type]  # names are what counts
    if not dry_run:
        for moved in list(plan.moved):
            try:
                config_mod.add_server(moved.spec, config_path)
            except UsageError as exc:  # added meanwhile by someone else
                plan.moved.remove(moved)
                plan.skipped.append(importing.Skipped(moved.source, exc.message, already=True))
    removed: list[str] = []
    if plan.secrets or replace:
        entry, _ = emceepee_entry(host, doc, name, config)
        if plan.secrets:
            entry["env"] = {**(entry.get("env") or {}), **plan.secrets}
        if replace:
            servers = doc.servers(host.servers_key)
            gone = [m.source for m in plan.moved]
            gone += [
                s.name
                for s in plan.skipped
                if s.already and _same(known.get(s.name), entries.get(s.name), host)
            ]
            removed = [n for n in gone if servers.pop(n, None) is not None]
    changed = doc.changed()
    diff = masked_diff(doc.diff()) if changed else ""
    backup = config_file.write(doc) if changed and not dry_run else None
    servers_now = doc.servers(host.servers_key)
    return {
        "host": host.key,
        "file": str(path),
        "config": str(config_path),
        "dry_run": dry_run,
        "moved": [server_row(m.spec) | {"source": m.source, "notes": m.notes} for m in plan.moved],
        "skipped": [{"name": s.name, "reason": s.reason} for s in plan.skipped],
        "secrets": sorted(plan.secrets),
        "host_file": {
            "changed": changed,
            "backup": str(backup) if backup else None,
            "removed": removed,
            "kept": [n for n in servers_now if n != name],
            "diff": diff,
            "had_comments": doc.had_comments,
        },
    }


def say(result: dict[str, Any]) -> None:
    from emceepee_cli.cli.server_rows import target
    from emceepee_cli.hosts.catalog import find

    would = "Would copy" if result["dry_run"] else "Copied"
    host_file, title = result["host_file"], find(result["host"]).title
    render.table(
        f"{would} into {result['config']}:",
        ("name", "transport", "target", "notes"),
        ((m["name"], m["transport"], target(m), "; ".join(m["notes"])) for m in result["moved"]),
        empty=f"No server of {result['file']} was copied.",
    )
    if result["skipped"]:
        render.table(
            "Skipped:", ("name", "reason"), ((s["name"], s["reason"]) for s in result["skipped"]), empty=""
        )
    if result["secrets"]:
        render.line(
            f"Secrets kept out of {result['config']}: {', '.join(result['secrets'])}. "
            "The config refers to each as "
            f'${{NAME}}; the values are in the "env" block of emceepee\'s entry in {result["file"]}.'
        )
    if result["dry_run"]:
        if host_file["diff"]:
            render.line(host_file["diff"].rstrip("\n"))
        render.note(f"(dry run: neither {result['config']} nor {result['file']} was changed)")
        return
    if host_file["changed"]:
        removed = f"; removed {', '.join(host_file['removed'])}" if host_file["removed"] else ""
        render.line(
            f"Updated {result['file']}{removed} (backup: {host_file['backup']}). Restart {title} to use it."
        )
    if host_file["had_comments"] and host_file["changed"]:
        render.warn(
            f"The file had comments, which JSON cannot keep: they are in the backup {host_file['backup']}."
        )
    if host_file["kept"] and host_file["removed"]:
        render.line(f"Still in {result['file']}: {', '.join(host_file['kept'])} (not moved; see above).")
