"""Every test gets its own emceepee home, so nothing reads or writes the real user's files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from emceepee_cli import redact


@pytest.fixture(autouse=True)
def emceepee_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "emceepee-home"
    monkeypatch.setenv("EMCEEPEE_HOME", str(home))
    monkeypatch.delenv("EMCEEPEE_CONFIG", raising=False)
    monkeypatch.delenv("EMCEEPEE_DB", raising=False)
    return home


@pytest.fixture(autouse=True)
def forget_secrets() -> Iterator[None]:
    """Values expanded in one test are not redacted from the next one's replies."""
    yield
    redact.forget()
