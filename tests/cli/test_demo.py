"""`emceepee demo` runs the real serve process against the example backends."""

from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT


def test_demo_walks_through_every_step_successfully() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "emceepee_cli", "demo"], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "✓ tool_30 got 30" in done.stdout
    assert "exited during tools/call 'crash'" in done.stdout
    assert "✓ ok" in done.stdout  # the crashed backend came back
    assert "Say hello to Ada." in done.stdout
    assert "✓ slept 1.5 s" in done.stdout  # fetched from the task
    assert "✓ hello Ada" in done.stdout  # the parked question, answered
    # serve's own warnings (the broken backend) come after the steps, not in their midst
    assert "emceepee" not in done.stderr
    steps, _, logged = done.stdout.partition("What serve logged meanwhile")
    assert "emceepee-demo-no-such-command" in logged and "WARNING" not in steps
