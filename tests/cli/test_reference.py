"""docs/cli.md is generated from the commands; regenerate with: python docs/generate.py"""

from __future__ import annotations

from emceepee_cli.cli.framework.reference import markdown
from tests.support import ROOT


def test_the_committed_cli_reference_is_current() -> None:
    committed = (ROOT / "docs" / "cli.md").read_text()
    assert markdown() == committed, "regenerate with: python docs/generate.py"


def test_the_reference_covers_every_command() -> None:
    reference = markdown()
    for path in ("emceepee servers add", "emceepee journal status", "emceepee tasks cancel", "emceepee call"):
        assert f"\n## {path}\n" in reference
