"""The README's commands are the ones CI runs."""

from __future__ import annotations

from tests.support import ROOT


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in readme.splitlines() if "pip install '.[test]'" in line)
    assert test_command in ci.splitlines()


def test_the_readme_demo_command_installs_and_runs_the_demo() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install . && emceepee demo" in readme
