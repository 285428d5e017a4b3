"""`emceepee journal status` and `emceepee paths`: where everything is, and what the journal holds.

Both only read: the journal is opened read-only (`store/inspect.py`), so they work on a journal
this emceepee would refuse to write (a newer one) and never create one.
"""

from __future__ import annotations

from typing import Any

import typer

from emceepee_cli.cli.framework.options import ConfigOpt, DbOpt, JsonOpt
from emceepee_cli.cli.terminal import render

app = typer.Typer(
    help="The journal: its health, counts and size.", no_args_is_help=True, rich_markup_mode=None
)


@app.command("status")
def status(db: DbOpt = None, json: JsonOpt = False) -> None:
    """The journal's health, schema, size, row counts and oldest row."""
    from emceepee_cli import paths
    from emceepee_cli.store import inspect

    out = inspect.status(paths.db_path(db))
    if json:
        render.as_json({"journal": out})
        return
    if not out["exists"]:
        render.line(f"No journal at {out['path']} yet (the first serve or tasks command makes it).")
        return
    counts: dict[str, Any] = out.get("counts", {})
    pairs: list[tuple[str, Any]] = [
        ("path", out["path"]),
        ("health", out["health"]),
        ("schema", f"{len(out['migrations'])} migrations ({', '.join(out['migrations'])})"),
        ("size", f"{out['bytes']:,} bytes in {len(out['files'])} file(s)"),
        ("mode", out["mode"] + ("" if out["private"] else "  (readable by others: chmod 600 it)")),
        ("oldest row", out["oldest"] or "(none)"),
    ]
    for table, count in counts.items():
        pairs.append((table, _count(count)))
    render.fields(pairs)


def _count(count: int | dict[str, int]) -> str:
    if isinstance(count, int):
        return str(count)
    total = sum(count.values())
    return f"{total}" + (" (" + ", ".join(f"{k} {v}" for k, v in count.items()) + ")" if count else "")


def paths(config: ConfigOpt = None, db: DbOpt = None, json: JsonOpt = False) -> None:
    """Where emceepee keeps its config, journal, logs and key, and the fleet's runtime folder."""
    from emceepee_cli import paths as paths_mod
    from emceepee_cli.hosts.catalog import HOSTS
    from emceepee_cli.seal import KEY_FILE

    found = {
        "config": str(paths_mod.config_path(config)),
        "journal": str(paths_mod.db_path(db)),
        "logs": str(paths_mod.logs_dir()),
        "key": str(paths_mod.data_dir() / KEY_FILE),
        "data": str(paths_mod.data_dir()),
        "runtime": str(paths_mod.runtime_dir()),
    }
    if json:
        render.as_json({"paths": found, "hosts": {h.key: str(h.path()) for h in HOSTS.values()}})
        return
    render.fields(
        [(name, f"{where}{'' if _exists(where) else '  (not yet)'}") for name, where in found.items()]
    )


def _exists(where: str) -> bool:
    from pathlib import Path

    return Path(where).exists()
