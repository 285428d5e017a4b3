"""The process module through both of its readers: Linux's /proc, and psutil as it is read where
there is no /proc (macOS, Windows), run here on Linux so that path is exercised too. Real
processes; what a process that may not be read looks like is made by hiding it from the reader."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from emceepee_cli import processes, start_tokens

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]
# Starts a child in its own group and one that leaves it (setsid), says their pids, and waits.
FAMILY = """
import subprocess, sys, time
member = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
print(member.pid, escaped.pid, flush=True)
time.sleep(60)
"""


@pytest.fixture(params=["proc", "psutil"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which reader the module uses: /proc (where there is one), or psutil as without it."""
    name = str(request.param)
    if name == "proc" and not processes.HAVE_PROC:
        pytest.skip("no /proc here")
    monkeypatch.setattr(processes, "HAVE_PROC", name == "proc")
    return name


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    with subprocess.Popen(SLEEP) as process:
        yield process
        process.kill()


def test_a_process_is_its_pid_and_start_time_and_only_it_is_signalled(
    reader: str, sleeper: subprocess.Popen[bytes]
) -> None:
    me = processes.identify(sleeper.pid)
    assert me.start is not None and me.running()
    reused = processes.Proc(sleeper.pid, me.start + 1)  # the same pid, started at another time
    unknown = processes.Proc(sleeper.pid, None)
    for other in (reused, unknown):
        assert not other.running()
        other.signal(signal.SIGKILL)
    assert sleeper.poll() is None, "a pid that cannot be told to be this process is never signalled"
    me.signal(signal.SIGKILL)
    sleeper.wait(timeout=10)
    assert not me.running() and processes.stat(sleeper.pid) is None and not processes.exists(sleeper.pid)


def test_a_child_that_exited_and_is_not_reaped_is_exited_and_dead(reader: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    ) as child:
        token = start_tokens.start_token(child.pid)
        assert token is not None and start_tokens.same_process(child.pid, token) is True
        assert child.stdin is not None
        child.stdin.close()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped: a zombie
        found = processes.stat(child.pid)
        assert found is not None and found.exited and found.state == "Z"
        assert processes.exists(child.pid)
        assert not processes.identify(child.pid).running()
        assert start_tokens.start_token(child.pid) is None
        assert start_tokens.same_process(child.pid, token) is False


def test_a_live_process_is_the_one_its_token_names_and_never_declared_dead(
    reader: str, sleeper: subprocess.Popen[bytes]
) -> None:
    token = start_tokens.start_token(sleeper.pid)
    assert token is not None and token.startswith("linux:" if reader == "proc" else "wall:")
    assert start_tokens.same_process(sleeper.pid, token) is True
    assert start_tokens.same_process(sleeper.pid, None) is None  # an old row: the heartbeat decides
    assert start_tokens.same_process(sleeper.pid, "ps:Mon Jan  1 00:00:00 2024") is None  # another kind
    kind, _, start = token.rpartition(":")
    # Another start of the same kind: on Linux the pid was reused; a wall-clock start may have been
    # moved by a clock step, so there it cannot tell.
    expected = False if reader == "proc" else None
    assert start_tokens.same_process(sleeper.pid, f"{kind}:{int(start) + 1}") is expected


def test_a_process_that_is_gone_is_dead(reader: str) -> None:
    with subprocess.Popen([sys.executable, "-c", "pass"]) as done:
        done.wait()
    assert processes.stat(done.pid) is None and not processes.exists(done.pid)
    assert start_tokens.same_process(done.pid, "linux:boot:1") is False
    assert start_tokens.start_token(done.pid) is None


def test_a_process_that_may_not_be_read_is_neither_signalled_nor_declared_dead(
    reader: str, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    me = processes.identify(sleeper.pid)
    token = start_tokens.start_token(sleeper.pid)
    if reader == "proc":  # as /proc mounted with hidepid shows another user's process: not at all
        monkeypatch.setattr(processes, "PROC", tmp_path)
    else:

        def denied(pid: int) -> psutil.Process:
            raise psutil.AccessDenied(pid)

        monkeypatch.setattr(psutil, "Process", denied)
    assert processes.stat(sleeper.pid) is None and processes.exists(sleeper.pid)
    assert start_tokens.same_process(sleeper.pid, token) is None, "cannot tell: the heartbeat decides"
    assert not me.running()
    me.signal(signal.SIGKILL)
    assert sleeper.poll() is None


def test_the_tree_holds_the_group_and_a_child_that_left_it_while_its_parent_lives(reader: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", FAMILY], stdout=subprocess.PIPE, start_new_session=True
    ) as parent:
        assert parent.stdout is not None
        member, escaped = map(int, parent.stdout.readline().split())
        found = processes.tree(parent.pid)
        try:
            assert {member, escaped} <= {p.pid for p in found}
            assert parent.pid not in {p.pid for p in found}
            group = {p.pid for p in processes.tree(parent.pid, descendants=False)}
            assert member in group and escaped not in group
        finally:
            for proc in found:
                proc.signal(signal.SIGKILL)
            parent.kill()


def test_ancestors_lead_up_from_a_process_through_its_parents(
    reader: str, sleeper: subprocess.Popen[bytes]
) -> None:
    above = processes.ancestors(sleeper.pid)
    assert above[0] == os.getpid()
    assert os.getppid() <= 1 or above[1] == os.getppid()


def test_only_linux_has_the_children_files_the_scan_each_second_walks(reader: str) -> None:
    below = processes.descendants(os.getpid())
    assert (below is None) == (reader == "psutil")
