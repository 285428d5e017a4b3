"""`emceepee logs` and `emceepee events`: what backends wrote to stderr, and what the journal recorded.

Both read files another process writes (serve): they never lock or change them. `-f` follows:
the files are looked at a few times a second, a log that was rotated (or truncated) is read again
from its start, and Ctrl-C stops (exit 0). With `--json` a listing is one JSON document; a
followed stream is one JSON object per line.
"""

from __future__ import annotations

import json as jsonlib
import re
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
LimitOpt = Annotated[int, typer.Option("--limit", "-n", help="How many of the latest to show first.")]
LinesAlias = Annotated[
    int | None, typer.Option("--lines", hidden=True, help="The former name of --limit.", show_default=False)
]
DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
EVENT_ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}", re.IGNORECASE)  # a ULID, as ids.py makes them


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
    limit: LimitOpt = 20,
    lines: LinesAlias = None,
    json: JsonOpt = False,
) -> None:
    """Show (or follow) the backends' stderr logs.

    The latest lines of each backend's log, or of one; -f keeps printing what is added. A
    backend's log is written by whatever started it: `serve`, or `tools`, `call` and `doctor`
    (each start begins with a line naming it).
    """
    from emceepee_cli import paths

    lines = limit if lines is None else lines
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
    limit: LimitOpt = 20,
    server: Annotated[
        str | None, typer.Option("--server", help="Only this server's events.", show_default=False)
    ] = None,
    type_: Annotated[
        list[str] | None,
        typer.Option(
            "--type",
            metavar="TYPE",
            help="Only events of this type (task_status, server_change, …); repeatable.",
            show_default=False,
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only events since then: an age (30s, 10m, 2h, 1d), a time (2026-01-31T12:00, local "
            "unless it names its zone), or an event id (the events after it).",
            show_default=False,
        ),
    ] = None,
    lines: LinesAlias = None,
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    """Show (or follow) the journal's events.

    Task states, backends connecting or failing, notifications: what serve delivered to hosts.
    """
    from emceepee_cli import paths
    from emceepee_cli.store import inspect

    limit = limit if lines is None else lines
    after, at = since_bound(since) if since else (None, None)
    types = type_ or []
    path = paths.db_path(db)
    rows = [_event(r) for r in inspect.events(path, after, limit, server, types, at)] if limit else []
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
    last = [rows[-1]["event_id"] if rows else _newest(path) or after]

    def tick() -> None:
        for row in inspect.events(path, last[0], 1000, server, types, at):
            event = _event(row)
            _event_line(event, json)
            last[0] = event["event_id"]

    _follow(tick)


def since_bound(text: str) -> tuple[str | None, str | None]:
    """`--since` as (an event id to read after, or a time as the journal writes it)."""
    from datetime import UTC, datetime

    from emceepee_cli.clock import now_iso
    from emceepee_cli.errors import UsageError

    text = text.strip()
    if age := DURATION.fullmatch(text):
        return None, now_iso(-float(age.group(1)) * UNIT_S[age.group(2)])
    if EVENT_ID.fullmatch(text):
        return text.upper(), None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(
            f"--since '{text}' is not an age, a time or an event id.",
            hint="E.g. --since 10m, --since 2h, --since 2026-01-31T12:00, or an event id as events shows it.",
        ) from None
    at = (at if at.tzinfo else at.astimezone()).astimezone(UTC)
    return None, at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


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
