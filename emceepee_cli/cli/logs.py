"""`emceepee logs` and `emceepee events`: what backends wrote to stderr, and what the journal recorded.

Both read files another process writes (serve): they never lock or change them. `-f` follows:
the files are looked at a few times a second, a log that was rotated (or truncated) is read again
from its start, and Ctrl-C stops (exit 0). With `--json` a listing is one JSON document; a
followed stream is one JSON object per line.
"""

from __future__ import annotations

import json as jsonlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from emceepee_cli.cli.framework.options import DbOpt, JsonOpt
from emceepee_cli.cli.terminal import render

if TYPE_CHECKING:
    from emceepee_cli.store.records import EventRow, OwnedEvent

FOLLOW_EVERY_S = 0.2
MAX_ROTATED = 100  # rotated files of one log read at most, whatever `log_backups` was
FollowOpt = Annotated[
    bool, typer.Option("--follow", "-f", help="Keep printing what is added (Ctrl-C stops).")
]
LinesOpt = Annotated[int, typer.Option("--lines", "-n", help="How many of the latest to show first.")]


@dataclass
class Tail:
    """A log file read from `offset` on; `ident` tells a rotated (new) file from the one we read."""

    server: str
    path: Path
    offset: int = 0
    ident: tuple[int, int] | None = None
    partial: str = ""

    def new_lines(self) -> list[str]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return []
        if (st.st_dev, st.st_ino) != self.ident or st.st_size < self.offset:  # rotated or truncated
            self.ident, self.offset, self.partial = (st.st_dev, st.st_ino), 0, ""
        if st.st_size == self.offset:
            return []
        with self.path.open("rb") as fp:
            fp.seek(self.offset)
            data = fp.read()
        self.offset += len(data)
        text = self.partial + data.decode("utf-8", errors="replace")
        *lines, self.partial = text.split("\n")
        return lines


def _log_files(folder: Path, server: str | None) -> dict[str, Path]:
    from emceepee_cli.errors import NotFound

    if server is not None:
        path = folder / f"{server}.log"
        if not path.exists():
            known = ", ".join(sorted(p.stem for p in folder.glob("*.log"))) or "(none yet)"
            raise NotFound(
                f"No log for '{server}' in {folder}. Logs there: {known}.",
                hint="A backend's stderr is written there once `emceepee serve` (or `tools`, `call` or "
                "`doctor`) has started it.",
            )
        return {server: path}
    return {p.stem: p for p in sorted(folder.glob("*.log"))}


def _latest(path: Path, n: int) -> list[str]:
    """The last `n` lines of a log, reaching into its rotated predecessors (`NAME.log.1`, `.2` …)
    if need be."""
    from emceepee_cli.backends.logfile import rotated

    lines: list[str] = []
    for part in (path, *rotated(path, MAX_ROTATED)):
        if len(lines) >= n or not part.exists():
            break
        lines = part.read_text(encoding="utf-8", errors="replace").splitlines() + lines
    return lines[-n:] if n else []


def logs(
    server: Annotated[
        str | None, typer.Argument(metavar="SERVER", help="Only this backend's log.", show_default=False)
    ] = None,
    follow: FollowOpt = False,
    lines: LinesOpt = 20,
    json: JsonOpt = False,
) -> None:
    """Show (or follow) the backends' stderr logs.

    The latest lines of each backend's log, or of one; -f keeps printing what is added. A
    backend's log is written by whatever started it: `serve`, or `tools`, `call` and `doctor`
    (each start begins with a line naming it).
    """
    from emceepee_cli import paths

    folder = paths.logs_dir()
    files = _log_files(folder, server)
    several = server is None
    shown = [(name, text) for name, path in files.items() for text in _latest(path, lines)]
    if json and not follow:
        render.as_json(
            {"logs": [{"server": name, "line": text} for name, text in shown], "folder": str(folder)}
        )
        return
    for name, text in shown:
        _log_line(name, text, several, json)
    if not files and not follow:
        render.line(f"No backend logs in {folder} yet.")
    if follow:
        tails = {name: _at_end(name, path) for name, path in files.items()}
        _follow(lambda: _log_ticks(tails, folder, server, several, json))


def _at_end(name: str, path: Path) -> Tail:
    st = path.stat()
    return Tail(name, path, st.st_size, (st.st_dev, st.st_ino))


def _log_ticks(tails: dict[str, Tail], folder: Path, server: str | None, several: bool, json: bool) -> None:
    if server is None:  # a backend started since: its log appears
        for path in folder.glob("*.log"):
            tails.setdefault(path.stem, Tail(path.stem, path))
    for name, tail in tails.items():
        for text in tail.new_lines():
            _log_line(name, text, several, json)


def _log_line(server: str, text: str, several: bool, json: bool) -> None:
    if json:
        render.json_line({"server": server, "line": text})
    else:
        render.line(f"{server} | {text}" if several else text)


def _follow(tick: Any) -> None:
    try:
        while True:
            tick()
            time.sleep(FOLLOW_EVERY_S)
    except KeyboardInterrupt:
        render.line()


def events(
    follow: FollowOpt = False,
    lines: LinesOpt = 20,
    server: Annotated[
        str | None, typer.Option("--server", help="Only this server's events.", show_default=False)
    ] = None,
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    """Show (or follow) the journal's events.

    Task states, backends connecting or failing, notifications: what serve delivered to hosts.
    """
    from emceepee_cli import paths
    from emceepee_cli.store import inspect

    path = paths.db_path(db)
    rows = [_event(r) for r in inspect.events(path, limit=lines, server=server)] if lines else []
    if json and not follow:
        render.as_json({"events": rows})
        return
    if not follow:
        render.table(
            None, ("time", "type", "server", "data"), (_event_cells(e) for e in rows), empty="No events."
        )
        return
    for event in rows:
        _event_line(event, json)
    last = [rows[-1]["event_id"] if rows else _newest(path)]

    def tick() -> None:
        for row in inspect.events(path, after=last[0], limit=1000, server=server):
            event = _event(row)
            _event_line(event, json)
            last[0] = event["event_id"]

    _follow(tick)


def _newest(path: Path) -> str | None:
    from emceepee_cli.store import inspect

    found = inspect.events(path, limit=1)
    return str(found[-1]["event_id"]) if found else None


def _event(row: EventRow) -> OwnedEvent:
    """A journaled event as `await_activity` shows it (its data parsed; kept as text if it is not JSON)."""
    try:
        data = jsonlib.loads(row["data"])
    except ValueError:
        data = row["data"]
    from emceepee_cli.store.records import OwnedEvent

    return OwnedEvent(
        event_id=row["event_id"],
        instance_id=row["instance_id"],
        type=row["type"],
        server=row["server"],
        created_at=row["created_at"],
        data=data,
    )


def _event_cells(event: OwnedEvent) -> tuple[str, str, str, str]:
    data = jsonlib.dumps(event["data"], ensure_ascii=False) if event["data"] not in (None, {}) else ""
    return (str(event["created_at"]), str(event["type"]), str(event.get("server") or ""), data)


def _event_line(event: OwnedEvent, json: bool) -> None:
    if json:
        render.json_line(event)
    else:
        render.line("  ".join(cell for cell in _event_cells(event) if cell))
