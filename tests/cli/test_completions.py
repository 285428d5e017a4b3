"""completions/ holds the generated shell completion scripts; regenerate with completions/generate.py."""

from __future__ import annotations

import runpy

import pytest

from tests.support import ROOT

generate = runpy.run_path(str(ROOT / "completions" / "generate.py"))


@pytest.mark.parametrize("shell", generate["SHELLS"])
def test_the_committed_completion_script_is_current(shell: str) -> None:
    committed = (ROOT / "completions" / f"emceepee.{shell}").read_text()
    assert generate["script"](shell) == committed, "regenerate with: python completions/generate.py"
    assert "_EMCEEPEE_COMPLETE" in committed
