"""Every fleet a test started is stopped when it ends, whatever the test did: a fleet is detached
(nobody's child), so nothing else would stop it."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.fronts import STOP_S, fleets_of
from tests.support import alive


@pytest.fixture(autouse=True)
def fleets_stopped(emceepee_home: Path) -> Iterator[None]:
    yield
    home = Path(os.environ["EMCEEPEE_HOME"])  # the test's own, should it have moved it
    running = [pid for pid in fleets_of(home) if alive(pid)]
    for pid in running:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_S
    for pid in running:
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
