"""Every path the code's docstrings and comments, or the README, name exists: a file moved is a
file whose mentions move with it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support import ROOT

PACKAGE = ROOT / "emceepee_cli"
# `calls/tasks.py`, `emceepee_cli/store/db.py`, `tests/core/test_tasks.py`, `calls/spool.Held`.
NAMED = re.compile(r"(?<![\w./~$-])((?:[a-z_]+/)+[a-z_]+)(\.py\b|\.[A-Z_a-z]\w*)")
# Folders a mention may start from: the package's, or the repository's.
BASES = (PACKAGE, ROOT)


# Paths in other projects' trees (the SDK's modules, system folders) are not ours to check.
ELSEWHERE = ("mcp/", "mcp_types/", "typer/", "usr/", "bin/")


def mentions(text: str) -> set[tuple[str, str]]:
    return {(m.group(1), m.group(2)) for m in NAMED.finditer(text) if not m.group(1).startswith(ELSEWHERE)}


def exists(path: str, suffix: str = ".py") -> bool:
    """A module (`calls/spool.Held` names calls/spool.py), a package, or a file as written (docs/cli.md)."""
    return any(
        (base / f"{path}.py").is_file()
        or (base / path / "__init__.py").is_file()
        or (base / f"{path}{suffix}").is_file()
        for base in BASES
    )


def missing_in(files: list[Path]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for file in files:
        gone = {path + suffix for path, suffix in mentions(file.read_text()) if not exists(path, suffix)}
        if gone:
            out[str(file.relative_to(ROOT))] = gone
    return out


def test_every_path_the_code_names_exists() -> None:
    files = [p for d in ("emceepee_cli", "tests", "benchmarks", "examples") for p in (ROOT / d).rglob("*.py")]
    files = [p for p in files if "_examples" not in p.parts and p != Path(__file__)]
    assert missing_in(files) == {}


def test_every_path_the_readme_names_exists() -> None:
    assert missing_in([ROOT / "README.md"]) == {}


def test_a_moved_file_is_caught() -> None:
    assert mentions("see core/backend.py and calls/spool.Held") == {
        ("core/backend", ".py"),
        ("calls/spool", ".Held"),
    }
    assert not exists("core/backend") and exists("calls/spool")
