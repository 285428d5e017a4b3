"""Stopping what a dead emceepee left running: real processes, a real journal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from emceepee_cli import processes
from emceepee_cli.backends import leftovers
from emceepee_cli.store.journal import Journal

pytestmark = pytest.mark.skipif(not processes.HAVE_PROC, reason="Linux start times: clock ticks, boot ids")


def test_leftovers_are_stopped_only_when_pid_and_start_time_match_and_the_owner_is_dead(
    emceepee_home: Path,
) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    left, reused, owned = (subprocess.Popen(sleeper) for _ in range(3))
    journal = Journal()
    try:
        journal.instances.register("dead")
        journal.instances.stop("dead")
        journal.instances.register("alive")  # this process: alive
        for instance, process, shift in (("dead", left, 0), ("dead", reused, 1), ("alive", owned, 0)):
            start = processes.identify(process.pid).start
            assert start is not None
            journal.spawned.add(instance, "h", process.pid, start + shift)
        found = leftovers.reap(journal)
        left.wait(timeout=10)
        assert found == 2
        assert reused.poll() is None, "a pid whose start time differs is another process: never signalled"
        assert owned.poll() is None, "a live instance's backend is its own business"
        assert [(r["instance_id"], r["pid"]) for r in journal.db["spawned"].rows] == [("alive", owned.pid)]
    finally:
        for process in (left, reused, owned):
            process.kill()
            process.wait()
        journal.close()


def test_what_an_instance_of_an_earlier_boot_left_is_forgotten_never_signalled(emceepee_home: Path) -> None:
    """After a reboot a new process can have a recorded pid and the same clock ticks since boot: a
    row whose instance started in another boot names nothing that still runs, so it is dropped."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    journal = Journal()
    try:
        journal.instances.register("before-reboot")
        journal.instances.stop("before-reboot")
        journal.db.execute(
            "UPDATE instances SET proc_start = ? WHERE instance_id = ?",
            ["linux:00000000-0000-0000-0000-000000000000:12345", "before-reboot"],
        )
        start = processes.identify(sleeper.pid).start
        assert start is not None
        journal.spawned.add("before-reboot", "h", sleeper.pid, start)  # same pid, same ticks
        assert leftovers.reap(journal) == 0
        assert sleeper.poll() is None, "a process of this boot is not what an earlier boot left"
        assert list(journal.db["spawned"].rows) == []
    finally:
        sleeper.kill()
        sleeper.wait()
        journal.close()
