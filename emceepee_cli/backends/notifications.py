"""What backends said that is kept for asking: notifications (get_notifications) and logs (get_logs).

Both are bounded, whatever a backend sends: at most `NOTIFICATIONS_KEPT` and `LOGS_KEPT`
entries, and fairly: when full, the oldest entry of the server holding the most falls off
(counted in `dropped`), so a backend that floods stderr pushes out its own lines, never a quiet
one's start-up error. A log message is cut at
`LOG_MESSAGE_CHARS`, notification params over `PARAMS_KEPT_BYTES` are replaced by their size,
and a repeat of a server's latest notification (same method and params) is counted on that
entry (`count`, `last_time`) instead of kept again.
"""

from __future__ import annotations

import heapq
import json
from collections import deque
from typing import Any

from emceepee_cli.clock import now_iso
from emceepee_cli.redact import redact

NOTIFICATIONS_KEPT = 1000
LOGS_KEPT = 5000
LOG_MESSAGE_CHARS = 4096  # stderr lines are already cut at about this
PARAMS_KEPT_BYTES = 16 * 1024
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def kept_params(params: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The params as kept (in events too), and their JSON (a key to recognise repeats by)."""
    encoded = json.dumps(params, sort_keys=True, default=str)
    if len(encoded) > PARAMS_KEPT_BYTES:
        return {"omitted": f"{len(encoded)} bytes of params, over the {PARAMS_KEPT_BYTES} kept"}, encoded
    return params, encoded


class Kept:
    """Entries of every server, in arrival order, at most `limit` in all; when full, the oldest of
    the server holding the most falls off."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._by_server: dict[str, deque[tuple[int, dict[str, Any]]]] = {}
        self._count = 0
        self._seq = 0
        self.dropped: dict[str, int] = {}

    def __len__(self) -> int:
        return self._count

    def append(self, server: str, entry: dict[str, Any]) -> None:
        self._seq += 1
        self._by_server.setdefault(server, deque()).append((self._seq, entry))
        self._count += 1
        if self._count > self.limit:
            fullest = max(self._by_server, key=lambda name: len(self._by_server[name]))
            self._by_server[fullest].popleft()
            self._count -= 1
            self.dropped[fullest] = self.dropped.get(fullest, 0) + 1

    def entries(self, server: str | None) -> list[dict[str, Any]]:
        if server is not None:
            return [entry for _, entry in self._by_server.get(server, ())]
        return [entry for _, entry in heapq.merge(*self._by_server.values(), key=lambda kept: kept[0])]

    def dropped_note(self, server: str | None) -> dict[str, Any]:
        """How many older entries fell off to bound memory (the server's, or all); nothing if none."""
        count = self.dropped.get(server, 0) if server is not None else sum(self.dropped.values())
        return {"dropped": count} if count else {}


class Heard:
    def __init__(self) -> None:
        self.notifications = Kept(NOTIFICATIONS_KEPT)
        self.logs = Kept(LOGS_KEPT)
        self._latest: dict[str, dict[str, Any]] = {}  # server -> its latest notification entry

    def __repr__(self) -> str:
        return f"<Heard notifications={len(self.notifications)} logs={len(self.logs)}>"

    def notification(self, server: str, method: str, params: dict[str, Any]) -> None:
        latest = self._latest.get(server)
        if latest is not None and latest["method"] == method and latest["params"] == params:
            latest["count"] = latest.get("count", 1) + 1
            latest["last_time"] = now_iso()
            return
        entry = {"time": now_iso(), "server": server, "method": method, "params": params}
        self.notifications.append(server, entry)
        self._latest[server] = entry

    def log(self, server: str, level: str, message: str, source: str) -> None:
        message = redact(message)  # a backend may print its environment, or a path with a secret
        if len(message) > LOG_MESSAGE_CHARS:
            message = message[:LOG_MESSAGE_CHARS] + f" … [cut: {len(message)} characters]"
        entry = {"time": now_iso(), "server": server, "level": level, "source": source, "message": message}
        self.logs.append(server, entry)

    def notifications_of(self, server: str | None, limit: int) -> dict[str, Any]:
        rows = self.notifications.entries(server)
        return {"notifications": rows[-limit:], **self.notifications.dropped_note(server)}

    def logs_of(self, server: str | None, level: str | None, limit: int) -> dict[str, Any]:
        floor = LOG_LEVELS.index(level) if level else 0
        rows = [entry for entry in self.logs.entries(server) if _severity(entry["level"]) >= floor]
        return {"logs": rows[-limit:], **self.logs.dropped_note(server)}


def _severity(level: str) -> int:
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else 1  # stderr lines count as info
