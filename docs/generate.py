"""Write docs/cli.md, the command reference, from the commands themselves: python docs/generate.py"""

from __future__ import annotations

from pathlib import Path

from emceepee_cli.cli.framework.reference import markdown

if __name__ == "__main__":
    (Path(__file__).resolve().parent / "cli.md").write_text(markdown())
