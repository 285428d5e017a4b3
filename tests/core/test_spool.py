"""The result budget's setting, as serve's environment gives it (a bad value never stops serve)."""

from __future__ import annotations

import pytest

from emceepee_cli.calls import spool


@pytest.mark.parametrize(("value", "expected"), [("", spool.BUDGET_BYTES), ("2", 2 * 1024 * 1024), ("0", 0)])
def test_the_budget_is_read_in_mib(monkeypatch: pytest.MonkeyPatch, value: str, expected: int) -> None:
    monkeypatch.setenv(spool.BUDGET_ENV, value)
    assert spool._budget_bytes() == expected


@pytest.mark.parametrize("value", ["lots", "inf", "-inf", "nan", "1e400"])
def test_a_budget_that_is_no_number_of_mib_keeps_the_default(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(spool.BUDGET_ENV, value)
    assert spool._budget_bytes() == spool.BUDGET_BYTES
