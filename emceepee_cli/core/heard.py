"""What backends said that is kept for asking: notifications (get_notifications) and logs (get_logs).

Both are bounded, whatever a backend sends: at most `NOTIFICATIONS_KEPT` and `LOGS_KEPT`
entries (the oldest fall off and are counted in `dropped`), a log message is cut at
`LOG_MESSAGE_CHARS`, notification params over `PARAMS_KEPT_BYTES` are replaced by their size,
and a repeat of a server's latest notification (same method and params) is counted on that
entry (`count`, `last_time`) instead of kept again.
"""

from __future__ import annotations

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


class Heard:
    def __init__(self) -> None:
        self.notifications: deque[dict[str, Any]] = deque(maxlen=NOTIFICATIONS_KEPT)
        self.logs: deque[dict[str, Any]] = deque(maxlen=LOGS_KEPT)
        self.dropped = {"notifications": 0, "logs": 0}
        self._latest: dict[str, dict[str, Any]] = {}  # server -> its latest notification entry

    def __repr__(self) -> str:
        return f"<Heard notifications={len(self.notifications)} logs={len(self.logs)} dropped={self.dropped}>"

    def notification(self, server: str, method: str, params: dict[str, Any]) -> None:
        latest = self._latest.get(server)
        if latest is not None and latest["method"] == method and latest["params"] == params:
            latest["count"] = latest.get("count", 1) + 1
            latest["last_time"] = now_iso()
            return
        entry = {"time": now_iso(), "server": server, "method": method, "params": params}
        self._append(self.notifications, entry, "notifications")
        self._latest[server] = entry

    def log(self, server: str, level: str, message: str, source: str) -> None:
        message = redact(message)  # a backend may print its environment, or a path with a secret
        if len(message) > LOG_MESSAGE_CHARS:
            message = message[:LOG_MESSAGE_CHARS] + f" … [cut: {len(message)} characters]"
        entry = {"time": now_iso(), "server": server, "level": level, "source": source, "message": message}
        self._append(self.logs, entry, "logs")

    def notifications_of(self, server: str | None, limit: int) -> dict[str, Any]:
        rows = [n for n in self.notifications if server is None or n["server"] == server]
        return {"notifications": rows[-limit:], **self._dropped_note("notifications")}

    def logs_of(self, server: str | None, level: str | None, limit: int) -> dict[str, Any]:
        floor = LOG_LEVELS.index(level) if level else 0
        rows = [
            entry
            for entry in self.logs
            if (server is None or entry["server"] == server) and _severity(entry["level"]) >= floor
        ]
        return {"logs": rows[-limit:], **self._dropped_note("logs")}

    def _append(self, buffer: deque[dict[str, Any]], entry: dict[str, Any], name: str) -> None:
        if len(buffer) == buffer.maxlen:
            self.dropped[name] += 1
        buffer.append(entry)

    def _dropped_note(self, name: str) -> dict[str, Any]:
        """How many older entries (of every server) fell off to bound memory; nothing if none."""
        return {"dropped": self.dropped[name]} if self.dropped[name] else {}


def _severity(level: str) -> int:
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else 1  # stderr lines count as info
