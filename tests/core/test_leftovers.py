"""Stopping what a dead emceepee left running: real processes, a real journal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from emceepee_cli.core import leftovers, procs
from emceepee_cli.store.journal import Journal

pytestmark = pytest.mark.skipif(not procs.HAVE_PROC, reason="start times come from /proc")


def test_leftovers_are_stopped_only_when_pid_and_start_time_match_and_the_owner_is_dead(
    emceepee_home: Path,
) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    left, reused, owned = (subprocess.Popen(sleeper) for _ in range(3))
    journal = Journal()
    try:
        journal.register_instance("dead")
        journal.stop_instance("dead")
        journal.register_instance("alive")  # this process: alive
        for instance, process, shift in (("dead", left, 0), ("dead", reused, 1), ("alive", owned, 0)):
            start = procs.identify(process.pid).start
            assert start is not None
            journal.add_spawned(instance, "h", process.pid, start + shift)
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
