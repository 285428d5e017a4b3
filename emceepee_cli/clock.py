"""Wall-clock time as the journal and every JSON shape write it: UTC ISO 8601 to the millisecond.

Such timestamps sort as strings in time order, which is what the journal's queries compare.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

_second: tuple[int, str] = (-1, "")  # the last whole second formatted: every call makes a few stamps


def now_iso(offset_s: float = 0.0) -> str:
    """Now (plus `offset_s`, which may be negative), e.g. `2026-01-31T12:00:00.250Z`."""
    global _second
    millis = int((time.time() + offset_s) * 1000)
    seconds, part = divmod(millis, 1000)
    cached = _second  # read once: the journal's thread stamps too
    if cached[0] != seconds:
        cached = _second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    return f"{cached[1]}.{part:03d}Z"


def age(at: str, now: datetime | None = None) -> str:
    """How long ago `at` was, in its largest whole unit: `42s`, `5m`, `3h`, `2d`."""
    seconds = max(0, int(((now or datetime.now(UTC)) - datetime.fromisoformat(at)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
