"""Every test gets its own emceepee home and its own user home, so nothing reads or writes the real
user's files (emceepee's, or the hosts' configs the CLI reads `${VAR}`s from); every fleet a test
started is stopped when it ends, whatever the test did: a fleet is detached (nobody's child), so
nothing else would stop it."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from emceepee_cli import redact
from tests.fleet.fronts import STOP_S, fleets_of
from tests.support import alive


@pytest.fixture(autouse=True)
def emceepee_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "emceepee-home"
    monkeypatch.setenv("EMCEEPEE_HOME", str(home))
    monkeypatch.delenv("EMCEEPEE_CONFIG", raising=False)
    monkeypatch.delenv("EMCEEPEE_DB", raising=False)
    # `serve` in-process unless a test says otherwise (tests/fleet/fronts.py sets EMCEEPEE_FLEET=1):
    # what most tests look at (its pid's children, its stderr, a kill -9 of it) is serve's own.
    monkeypatch.setenv("EMCEEPEE_FLEET", "0")
    return home


@pytest.fixture(autouse=True)
def home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user home of this test (beside its tmp_path, which a test may want empty): the hosts'
    files the CLI reads are the ones the test writes there, never the real user's."""
    folder = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder / ".config"))
    for xdg in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "APPDATA"):
        monkeypatch.delenv(xdg, raising=False)
    return folder


@pytest.fixture(autouse=True)
def forget_secrets() -> Iterator[None]:
    """Values expanded in one test are not redacted from the next one's replies."""
    yield
    redact.forget()


@pytest.fixture(autouse=True)
def fleets_stopped(emceepee_home: Path) -> Iterator[None]:
    yield
    home = Path(os.environ.get("EMCEEPEE_HOME") or emceepee_home)  # the test's own, should it have moved it
    running = [pid for pid in fleets_of(home) if alive(pid)]
    for pid in running:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    for pid in running:
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
