"""Secrets out of everything emceepee says: each value a `${VAR}` expanded to reads as `${VAR}` again.

The config's expansion registers every value it substitutes (`register`), so whatever later
quotes an expanded field — a missing `cwd`, a URL in a connection error, a backend printing its
environment to stderr — can be rewritten on its way out of the process (`redact`,
`redact_data`). It is applied where text leaves: our meta-tool replies and their envelope, the
stderr log, the backends' log files and in-memory logs, and the journal's error texts. A
backend's own tool result passes through untouched, by contract.

Values shorter than `MIN_SECRET_CHARS` are not registered: `DEBUG=1` or `PORT=8080` are not
credentials, and rewriting every "1" would corrupt ids and numbers in every reply.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any

MIN_SECRET_CHARS = 6

_lock = threading.Lock()
_forms: dict[str, str] = {}  # an expanded value (or an escaped spelling of it) -> "${VAR}"
_pattern: re.Pattern[str] | None = None  # rebuilt on register; read without the lock


def register(var: str, value: str) -> None:
    """Remember that `${var}` expanded to `value`, so `value` never leaves the process."""
    global _pattern
    if len(value) < MIN_SECRET_CHARS:
        return
    form = "${" + var + "}"
    # The same value as it reads inside a JSON string or a Python repr, when those escape it.
    spellings = {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
    }
    with _lock:
        added = False
        for spelling in spellings:
            if spelling not in _forms:
                _forms[spelling], added = form, True
        if added:
            # Longest first, so a value that contains another is replaced whole.
            ordered = sorted(_forms, key=len, reverse=True)
            _pattern = re.compile("|".join(re.escape(s) for s in ordered))


def redact(text: str) -> str:
    """`text` with every registered value replaced by its `${VAR}` form."""
    pattern = _pattern
    if pattern is None or not text:
        return text
    return pattern.sub(lambda match: _forms[match.group(0)], text)


def redact_data(value: Any) -> Any:
    """A JSON-able value with `redact` applied to every string in it, keys included."""
    if _pattern is None:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(item) for item in value]
    return value


def forget() -> None:
    """Forget every registered value (tests start each case afresh)."""
    global _pattern
    with _lock:
        _forms.clear()
        _pattern = None


class RedactingFormatter(logging.Formatter):
    """A log formatter whose whole output — message, arguments, traceback — is redacted."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))
