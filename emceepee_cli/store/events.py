"""The `events` and `cursors` tables: what each `serve` told its host, and how far the host got.

Every event a `serve` emits is journaled under its instance; its cursor is the last event it
handed to its host. The events after a cursor are the ones that host never received.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlite_utils

from emceepee_cli.clock import now_iso
from emceepee_cli.redact import redact_data
from emceepee_cli.store.db import mapped
from emceepee_cli.store.records import Event, EventRow


class EventLog:
    """The events half of the journal (mixed into `Journal`)."""

    path: Path
    db: sqlite_utils.Database

    @mapped
    def add_event(self, instance_id: str, event: Event) -> None:
        row = EventRow(
            event_id=event["event_id"],
            instance_id=instance_id,
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
    def update_event_data(self, event_id: str, data: dict[str, Any]) -> None:
        self.db.execute("UPDATE events SET data = ? WHERE event_id = ?", [json.dumps(data), event_id])
