"""Whether the `serve` of an `instances` row still runs: the one rule, cheap to import.

On this machine a process is alive while its pid *and* start time match
(emceepee_cli/start_tokens.py), however stale its heartbeat; elsewhere, or for a row without a
start time, the heartbeat decides. The CLI asks this before it opens the journal for writing
(store/inspect.py), so it imports no SQLite layer.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from emceepee_cli import start_tokens
from emceepee_cli.clock import now_iso

if TYPE_CHECKING:
    from emceepee_cli.store.records import InstanceRow

HEARTBEAT_S = 5.0
STALE_AFTER_S = 30.0  # where the process cannot be checked, an owner silent this long is dead
STALE_ENV = "EMCEEPEE_STALE_AFTER_S"  # a test switch: a shorter staleness (and heartbeat)


def stale_after_s() -> float:
    return float(os.environ.get(STALE_ENV) or STALE_AFTER_S)


def heartbeat_s() -> float:
    return min(HEARTBEAT_S, stale_after_s() / 6)


RETURN_S = 60.0  # a fleet session's leftovers wait this long for its host to come back for them

# The sessions of a fleet share its process (pid and start); one that was alive recently may
# still be taken back by its host's front, which names it (fleet/hello.py's `previous`).
RECENT_FLEET_SESSIONS = (
    "SELECT i.instance_id FROM instances i WHERE i.heartbeat_at >= ? AND (SELECT COUNT(*) FROM "
    "instances j WHERE j.machine = i.machine AND j.pid = i.pid AND j.proc_start IS i.proc_start) > 1"
)


def instance_alive(row: InstanceRow) -> bool:
    if row.get("stopped_at"):
        return False
    if row["machine"] == socket.gethostname():
        same = start_tokens.same_process(row["pid"], row.get("proc_start"))
        if same is not None:
            return same
    return bool(row["heartbeat_at"] >= now_iso(-stale_after_s()))
