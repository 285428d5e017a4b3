"""The README's commands are the ones CI runs."""

from __future__ import annotations

import re

from tests.support import ROOT


def test_ci_runs_the_readme_test_command_verbatim_step_by_step() -> None:
    """Every step of the README's one test command, in its order (CI adds its checks between them)."""
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in readme.splitlines() if "pip install '.[test]'" in line)
    ci_steps = iter(step for line in ci.splitlines() for step in line.split(" && "))
    assert all(step in ci_steps for step in test_command.split(" && ")), (test_command, ci)


def test_the_readme_demo_command_installs_and_runs_the_demo() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install . && emceepee demo" in readme


def test_the_readme_says_how_long_the_tests_take_on_two_cores() -> None:
    readme = (ROOT / "README.md").read_text()
    development = readme[readme.index("## Development") :]
    said = re.search(
        r"on 2 cores the full suite takes about (\d+) to (\d+) minutes", " ".join(development.split())
    )
    assert said is not None and int(said.group(1)) < int(said.group(2))
