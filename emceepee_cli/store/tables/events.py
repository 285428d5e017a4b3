"""The `events` and `cursors` tables: what each `serve` told its host, and how far the host got.

Every event a `serve` emits is journaled under its instance; its cursor is the last of its own
events it handed to its host. The events after a cursor are the ones that host never received:
a `serve` starting claims those of dead instances (`claim`), first writer wins, and
delivers them once in its own session. A host that lost a reply reads its own session's
delivered events back (`between`).

An event row that does not decode (store/unreadable.py) is skipped, logged once: it is one notice,
the others still reach the host, and a claim moves the cursor past it all the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, cast

from emceepee_cli.clock import now_iso
from emceepee_cli.redact import redact_data
from emceepee_cli.store import unreadable
from emceepee_cli.store.connection import Part
from emceepee_cli.store.db import immediate, mapped
from emceepee_cli.store.liveness import RECENT_FLEET_SESSIONS, RETURN_S, instance_alive
from emceepee_cli.store.records import Event, EventRow, InstanceRow, OwnedEvent
from emceepee_cli.store.unreadable import json_column, text

# `data` is read as bytes, decoded by `as_event`: text that is not UTF-8 (damage SQLite does not
# check) then fails that one row, not the whole read, which would lose every event after it.
EVENT_COLUMNS = "event_id, instance_id, type, server, CAST(data AS BLOB) AS data, created_at"


class EventLog(Part):
    """The journal's events and cursors (`journal.events`): holds only the journal's connection, for
    its lifetime."""

    @mapped
    def add(self, event: OwnedEvent) -> None:
        row = EventRow(
            event_id=event["event_id"],
            instance_id=event["instance_id"],
            type=event["type"],
            server=event["server"],
            data=json.dumps(redact_data(event["data"])),
            created_at=event["created_at"],
        )
        self.db.table("events").insert(dict(row))

    @mapped
    def set_cursor(self, session_id: str, event_id: str) -> None:
        self.db.table("cursors").upsert(
            {"session_id": session_id, "last_event_id": event_id, "updated_at": now_iso()}, pk="session_id"
        )

    @mapped
    def update_data(self, event_id: str, data: dict[str, Any]) -> None:
        self.db.execute("UPDATE events SET data = ? WHERE event_id = ?", [json.dumps(data), event_id])

    @mapped
    def between(self, instance_id: str, after: str, upto: str, limit: int) -> list[Event]:
        """This instance's events after `after` up to `upto` (both ids), oldest first."""
        rows = self.db.query(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE instance_id = ? AND event_id > ? AND event_id <= ?"
            " ORDER BY event_id LIMIT ?",
            [instance_id, after, upto, limit],
        )
        return readable(cast(EventRow, r) for r in rows)

    @mapped
    def claim(self, claimer: str, limit: int, only: str | None = None, spare: bool = False) -> list[Event]:
        """Take the events that dead instances (`only`: that one; `spare`: not a fleet session's
        heard from within `RETURN_S`, whose host may yet come back) never delivered (after their
        cursor), at most `limit`.

        Each instance's claim moves its cursor in one write transaction that reads it first, so
        when several `serve`s start together each event goes to exactly one of them.
        """
        claimed: list[Event] = []
        spared = (
            {r["instance_id"] for r in self.db.query(RECENT_FLEET_SESSIONS, [now_iso(-RETURN_S)])}
            if spare and only is None
            else set()
        )
        sql = (
            "SELECT DISTINCT i.* FROM instances i JOIN events e USING (instance_id) WHERE i.instance_id != ?"
        )
        for inst in [cast(InstanceRow, r) for r in self.db.query(sql, [claimer])]:
            if len(claimed) >= limit:
                break
            if (only is not None and inst["instance_id"] != only) or inst["instance_id"] in spared:
                continue
            if not instance_alive(inst):
                claimed += self._claim(inst["instance_id"], limit - len(claimed))
        return claimed

    def _claim(self, instance_id: str, limit: int) -> list[Event]:
        with immediate(self.db):
            found = self.db.execute(
                "SELECT last_event_id FROM cursors WHERE session_id = ?", [instance_id]
            ).fetchone()
            cursor = found[0] if found else ""
            rows = list(
                self.db.query(
                    f"SELECT {EVENT_COLUMNS} FROM events WHERE instance_id = ? AND event_id > ?"
                    " ORDER BY event_id LIMIT ?",
                    [instance_id, cursor, limit],
                )
            )
            if rows:
                self.db.table("cursors").upsert(
                    {
                        "session_id": instance_id,
                        "last_event_id": rows[-1]["event_id"],
                        "updated_at": now_iso(),
                    },
                    pk="session_id",
                )
        return [{**event, "replayed": True} for event in readable(cast(EventRow, r) for r in rows)]


def readable(rows: Iterable[EventRow]) -> list[Event]:
    """The rows as events, without those that do not decode (each logged once)."""
    return unreadable.readable(rows, as_event)


def as_event(row: EventRow) -> Event:
    """An event row as the host receives it; `UnreadableRow` if a column does not decode."""
    what = f"event {row['event_id']}"
    return Event(
        event_id=text(row["event_id"], what),
        type=text(row["type"], what),
        server=text(row["server"], what, optional=True),
        created_at=text(row["created_at"], what),
        data=json_column(row["data"], what),
    )
