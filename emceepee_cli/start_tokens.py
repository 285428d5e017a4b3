"""Whether the `serve` an `instances` row names still runs: its pid plus a start token.

A pid alone does not name a process (the kernel reuses pids), so every `serve` records with its
pid a `start_token` (store/tables/instances.py). `same_process` answers for a row (store/liveness.py):
True, it still runs; False, it is gone, exited, or its pid names another process now; None, cannot
tell, which leaves it to the heartbeat. A process that may not be read is never declared dead
(the policy in emceepee_cli/processes.py). `other_boot` tells a token taken before this machine
last booted, whose processes all died with that boot (store/tables/spawned.py).

The start comes from `processes.stat`: clock ticks since boot on Linux, which nothing moves;
psutil's `create_time` elsewhere, which a clock step moves, so there a token that no longer
matches means "cannot tell".
"""

from __future__ import annotations

from emceepee_cli import processes

BOOT_ID = processes.PROC / "sys" / "kernel" / "random" / "boot_id"


def start_token(pid: int) -> str | None:
    """What an `instances` row records of when `pid` started, so that with the pid it names that
    process; None if it has exited or may not be read.

    On Linux `linux:<boot id>:<clock ticks since boot>`: the boot id, so that no process of a later
    boot matches (`other_boot`). Elsewhere `wall:<psutil's create_time in microseconds>`, which a
    clock step moves: there a token that no longer matches means "cannot tell" (`same_process`).
    """
    found = processes.stat(pid)
    if found is None or found.exited or found.start is None:
        return None
    return _token(found.start)


def _token(start: int) -> str:
    return f"linux:{_boot_id()}:{start}" if processes.HAVE_PROC else f"wall:{start}"


def same_process(pid: int, recorded: str | None) -> bool | None:
    """True: the process that recorded `recorded` (a `start_token`) still runs. False: it is gone,
    has exited, or its pid names another process now. None: cannot tell (no token recorded, a
    process that may not be read, a token of another kind or one a clock step may have moved)."""
    found = processes.stat(pid)
    if found is None:
        return None if processes.exists(pid) else False
    if found.exited:
        return False
    if recorded is None or found.start is None:
        return None
    current = _token(found.start)
    if current == recorded:
        return True
    return False if current.startswith("linux:") and recorded.startswith("linux:") else None


def other_boot(recorded: str | None) -> bool:
    """True when `recorded` (a `start_token`) was taken before this machine last booted: no process
    it names can still run, whatever pid and clock ticks a new one has."""
    if recorded is None or not recorded.startswith("linux:"):
        return False
    boot = recorded.split(":")[1]
    return boot not in ("?", _boot_id())


def _boot_id() -> str:
    """This boot's id; "?" where there is none (no /proc): such a token never tells another boot."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return "?"
