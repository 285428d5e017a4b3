"""Timestamps: UTC ISO 8601 to the millisecond, right whatever the offset and however often."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from emceepee_cli.clock import now_iso


def test_stamps_agree_with_datetime_for_any_offset() -> None:
    for offset in (0.0, -0.5, 0.999, -1.0005, 12345.678, -3 * 365.25 * 86400, 0.0):
        before = datetime.now(UTC) + timedelta(seconds=offset)
        stamp = now_iso(offset)
        after = datetime.now(UTC) + timedelta(seconds=offset)
        parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        assert len(stamp) == 24 and stamp.endswith("Z")
        assert before - timedelta(milliseconds=1) <= parsed <= after  # the same second, not a cached one


def test_stamps_sort_in_time_order() -> None:
    stamps = [now_iso() for _ in range(2000)]
    assert stamps == sorted(stamps)
    assert now_iso(-1.0) < now_iso() < now_iso(1.0) < now_iso(time.time())  # alternating offsets
