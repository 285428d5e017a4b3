"""The `spawned` table: the processes a `serve` started (its backends and what they ran), while they run.

A `serve` that dies without ending them leaves them behind; whoever looks next finds them here by
pid *and* start time, under an instance that is no longer alive, and ends them (backends/leftovers.py).
"""

from __future__ import annotations

import socket
from typing import Any, cast

from emceepee_cli import start_tokens
from emceepee_cli.clock import now_iso
from emceepee_cli.store.connection import Part
from emceepee_cli.store.db import mapped
from emceepee_cli.store.liveness import instance_alive
from emceepee_cli.store.records import LeftRow, SpawnedRow


class Spawned(Part):
    """The journal's spawned processes (`journal.spawned`): holds only the journal's connection, for
    its lifetime."""

    @mapped
    def add(self, instance_id: str, server: str, pid: int, start_time: int) -> None:
        row = SpawnedRow(
            instance_id=instance_id, server=server, pid=pid, start_time=start_time, spawned_at=now_iso()
        )
        self.db.table("spawned").insert(dict(row), replace=True)

    @mapped
    def forget(self, instance_id: str, pid: int) -> None:
        self.db.execute("DELETE FROM spawned WHERE instance_id = ? AND pid = ?", [instance_id, pid])

    @mapped
    def by_dead(self) -> list[LeftRow]:
        """What instances that are no longer alive spawned on this machine (and did not see end)."""
        rows = self.db.query(
            "SELECT i.*, s.server AS spawned_server, s.pid AS spawned_pid, s.start_time AS spawned_start,"
            " s.spawned_at FROM spawned s JOIN instances i USING (instance_id)"
        )
        dead, stale = [], []
        for row in rows:  # the instance's own columns, as instance_alive reads them
            if row["machine"] != socket.gethostname():
                continue
            if start_tokens.other_boot(row.get("proc_start")):  # its processes died with that boot: a pid and
                stale.append((row["instance_id"], row["spawned_pid"]))  # start tick now name another
                continue
            if not instance_alive(cast(Any, row)):
                dead.append(
                    LeftRow(
                        instance_id=row["instance_id"],
                        server=row["spawned_server"],
                        pid=row["spawned_pid"],
                        start_time=row["spawned_start"],
                        spawned_at=row["spawned_at"],
                        serve_pid=row["pid"],
                    )
                )
        for instance_id, pid in stale:
            self.forget(instance_id, pid)
        return dead
