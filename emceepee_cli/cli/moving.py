"""What `emceepee import HOST` does, and how it says so (the plan itself is `hosts/importing.py`)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emceepee_cli.cli.terminal import render

if TYPE_CHECKING:
    from emceepee_cli.config import ServerSpec
    from emceepee_cli.hosts.catalog import Host
    from emceepee_cli.hosts.config_file import HostFile
    from emceepee_cli.hosts.importing import Plan


def _same(spec: ServerSpec | None, entry: Any, host: Host) -> bool:
    """The host's entry starts what emceepee's server of that name starts."""
    if spec is None or not isinstance(entry, dict):
        return False
    url, _ = host.url_of(entry)
    if url is not None:
        return url == spec.url
    args = [str(a) for a in entry.get("args") or []]
    return entry.get("command") == spec.command and args == list(spec.args)


@dataclass(frozen=True)
class _HostEdit:
    """What `import` changes in the host's file: the plan's secrets go to emceepee's entry (`name`,
    starting emceepee with `config`) and, with `replace`, the servers it moved (or that emceepee
    already has, the same) leave."""

    host: Host
    name: str
    config: Path | None
    replace: bool
    entries: dict[str, Any]  # the host's servers as read
    known: dict[str, ServerSpec | None]  # emceepee's servers

    def apply(self, doc: HostFile, plan: Plan) -> list[str]:
        """Make the change in `doc`; the servers taken out."""
        from emceepee_cli.cli.host_entry import emceepee_entry

        if not (plan.secrets or self.replace):
            return []
        entry, _ = emceepee_entry(self.host, doc, self.name, self.config)
        if plan.secrets:
            entry["env"] = {**(entry.get("env") or {}), **plan.secrets}
        if not self.replace:
            return []
        servers = doc.servers(self.host.servers_key)
        gone = [m.source for m in plan.moved]
        gone += [s.name for s in plan.skipped if s.already and self._same(s.name)]
        return [n for n in gone if servers.pop(n, None) is not None]

    def _same(self, name: str) -> bool:
        return _same(self.known.get(name), self.entries.get(name), self.host)


def run(
    host_name: str, file: Path | None, *, replace: bool, dry_run: bool, name: str, config: Path | None
) -> dict[str, Any]:
    from emceepee_cli import config as config_mod
    from emceepee_cli import paths
    from emceepee_cli.cli.host_entry import host_target, masked_diff
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
    edit = _HostEdit(host, name, config, replace, entries, known)
    trial = copy.deepcopy(doc)
    edit.apply(trial, plan)
    trial.rendered()  # a host file that cannot take the change stops the import before anything is written
    if not dry_run:
        for moved in list(plan.moved):
            try:
                config_mod.add_server(moved.spec, config_path)
            except UsageError as exc:  # added meanwhile by someone else
                plan.moved.remove(moved)
                plan.skipped.append(importing.Skipped(moved.source, exc.message, already=True))
    removed = edit.apply(doc, plan)
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
    if host_file["kept"] and host_file["removed"]:
        render.line(f"Still in {result['file']}: {', '.join(host_file['kept'])} (not moved; see above).")
