"""The newest few of each pending list a reply carries, and where the rest is.

Questions waiting on the client (category 4) ride on every reply, and the tasks still working on
every promotion and `await_activity`: with hundreds parked, every reply would be hundreds of
kilobytes. So a block carries at most the newest `SHOWN` of each of its lists (oldest first, as
the full list has them). A list that was cut is named in the block's `total` (how many there are)
and `more` (how many were left out, and the call that lists them all); a block whose lists are
all whole has neither, so its shape is what it always was.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

SHOWN = 5  # of each list, per reply

T = TypeVar("T")


def newest(
    lists: Mapping[str, list[T]], listing: Mapping[str, str]
) -> tuple[dict[str, list[T]], dict[str, Any]]:
    """Each list (oldest first) cut to its newest `SHOWN`; and, when any was cut, the block's
    `total` and `more` for it. `listing[key]` is the call that lists all of `lists[key]`."""
    kept = {key: items[-SHOWN:] for key, items in lists.items()}
    cut = {key: len(items) for key, items in lists.items() if len(items) > SHOWN}
    if not cut:
        return kept, {}
    more = {key: {"count": count - SHOWN, "list_with": listing[key]} for key, count in cut.items()}
    return kept, {"total": cut, "more": more}


def merged(*blocks: Mapping[str, Any]) -> dict[str, Any]:
    """The `total` and `more` of several blocks (or cuts) joined into one block, as one."""
    out: dict[str, Any] = {}
    for block in blocks:
        for field in ("total", "more"):
            if field in block:
                out.setdefault(field, {}).update(block[field])
    return out
