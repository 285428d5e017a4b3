"""IDs: monotonic ULIDs (so `ORDER BY id` is creation order) and unique-prefix lookup."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ulid import ULID

from emceepee_cli.errors import NotFound, UsageError

_lock = threading.Lock()
_last = 0


def new_id() -> str:
    """A ULID string strictly greater than every one this process made before."""
    global _last
    with _lock:
        value = int(ULID())
        if value <= _last:
            value = _last + 1  # same millisecond: bump the random part, keep the order
        _last = value
        return str(ULID.from_int(value))


def resolve_prefix(prefix: str, candidates: Iterable[str], what: str, listing: str = "") -> str:
    """The one candidate starting with `prefix` (case-insensitive), or a clear error."""
    wanted = prefix.strip().upper()
    if not wanted:
        raise UsageError(f"Give a {what} id (or a unique prefix of one).")
    matches = sorted({c for c in candidates if c.upper().startswith(wanted)})
    if not matches:
        raise NotFound(f"No {what} has an id starting with '{prefix}'.", hint=listing or None)
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (" …" if len(matches) > 5 else "")
        raise UsageError(f"'{prefix}' matches {len(matches)} {what}s: {shown}.", hint="Type more of the id.")
    return matches[0]
