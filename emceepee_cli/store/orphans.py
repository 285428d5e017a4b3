"""How a row whose owner is gone is marked, and how a live owner knows it for its own all the same.

Whoever finds an owner dead settles what it left (store/tables/instances.py, `interrupt_orphans`): its
tasks `interrupted`, its questions `rejected`, each with an error that begins with ORPHANED. An
owner taken for dead by mistake (a CLI on another machine going by a stale heartbeat, an older
emceepee) is still running: it reads those rows as still open and still settles them first
(store/tables/tasks.py, store/tables/pending.py) until its watcher takes them back (`reclaim`).
"""

from __future__ import annotations

from emceepee_cli.store.records import PendingRow, TaskRow

ORPHANED = "emceepee stopped while this call was running"  # how every such error begins, old and new
MISTAKEN_ORPHAN = "(status = ? AND instance_id = ? AND error LIKE ?)"  # see owns_by_mistake


def owns_by_mistake(owner: str | None, row: TaskRow | PendingRow, settled: str) -> bool:
    """A row of this live process that another settled as an orphan: it is still this process's."""
    return (
        owner is not None
        and row.get("instance_id") == owner
        and row.get("status") == settled
        and str(row.get("error") or "").startswith(ORPHANED)
    )
