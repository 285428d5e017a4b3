"""Backends that a dead emceepee left running, and stopping them.

`serve` journals each backend process it spawns (pid and start time) and forgets it once it has
stopped it. A row still there after its instance died means that serve never got to stop it
(killed with SIGKILL, a crash, a power cut) and the backend ignored both stdin EOF and the
parent-death signal. Any later `serve` or CLI command stops such a process, with what it
started — but only when the instance that spawned it is dead (`store/liveness.py`) and the
pid still names that very process (same start time).
"""

from __future__ import annotations

import logging

import anyio.to_thread

from emceepee_cli import processes
from emceepee_cli.store.aio import AsyncJournal
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import LeftRow

log = logging.getLogger(__name__)

LEFTOVER_GRACE_S = 1.0  # after SIGTERM, before SIGKILL


def stop_leftovers(rows: list[LeftRow]) -> list[LeftRow]:
    """Stop the rows' processes (blocks, bounded); the rows that are now settled."""
    settled = []
    for row in rows:
        proc = processes.Proc(row["pid"], row["start_time"])
        if row["start_time"] is not None and proc.running():
            group = {proc} | processes.tree(proc.pid)
            if processes.terminate(group, LEFTOVER_GRACE_S):
                log.error("could not stop pid %s (%s)", proc.pid, whose(row))
                continue
            log.warning("stopped pid %s: %s", proc.pid, whose(row))
        settled.append(row)
    return settled


def whose(row: LeftRow) -> str:
    """What the journal knows of a leftover process, and no more: a backend's own process and what
    it started share its name; a process serve adopted without knowing which backend left it has none."""
    serve = f"serve pid {row['serve_pid']}" if row["serve_pid"] is not None else "serve"
    if not row["server"]:
        what = f"a process left by a backend of {serve}"
    else:
        what = f"backend '{row['server']}' of {serve}, or a process it started"
    return f"{what}, which is dead and did not stop it (instance {row['instance_id']})"


def reap(journal: Journal) -> int:
    """For the CLI: stop what dead instances left running; how many processes were found."""
    rows = journal.spawned.by_dead()
    for row in stop_leftovers(rows):
        journal.spawned.forget(row["instance_id"], row["pid"])
    return len(rows)


async def reap_async(journal: AsyncJournal) -> None:
    """For serve, in the background: the same, with the waiting done off the event loop."""
    try:
        rows = await journal.run(journal.sync.spawned.by_dead)
        if rows:
            for row in await anyio.to_thread.run_sync(stop_leftovers, rows):
                await journal.run(journal.sync.spawned.forget, row["instance_id"], row["pid"])
    except Exception:  # housekeeping never takes serve down
        log.exception("stopping what dead emceepee processes left running failed")
