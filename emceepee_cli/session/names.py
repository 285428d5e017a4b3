"""Names under which a backend's prompts (and, in direct mode, tools) appear on the host's own
lists: `server__name`.

A name the model APIs behind hosts accept (`[A-Za-z0-9_-]`, at most `limit` characters) is kept as
it is. Any other is cleaned, cut and given a short hash of the full name, so it depends only on
(server, name) and cannot take the unchanged name of another pair; the hash widens only on a
clash. Calls find their (server, name) through the table these names were made for, never by
splitting on `__` (server and tool names may contain it).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
DEFAULT_LIMIT = 64


def exposed_name(server: str, name: str, taken: set[str], limit: int = DEFAULT_LIMIT) -> str:
    full = f"{server}__{name}"
    clean = UNSAFE.sub("_", full)
    if clean == full and len(clean) <= limit and clean not in taken:
        return clean
    digest = hashlib.sha256(full.encode()).hexdigest()
    for width in (6, 8, 12, 16, 64):
        suffix = "_" + digest[:width]
        candidate = clean[: max(0, limit - len(suffix))].rstrip("_-") + suffix
        if candidate not in taken:
            return candidate
    raise ValueError(f"no free name for {full!r}")  # a full sha256 clash


def name_table(pairs: Iterable[tuple[str, str]], limit: int = DEFAULT_LIMIT) -> dict[str, tuple[str, str]]:
    """exposed name -> (server, name), for pairs in a stable order (config order, then listing order)."""
    table: dict[str, tuple[str, str]] = {}
    taken: set[str] = set()
    for server, name in pairs:
        exposed = exposed_name(server, name, taken, limit)
        taken.add(exposed)
        table[exposed] = (server, name)
    return table
