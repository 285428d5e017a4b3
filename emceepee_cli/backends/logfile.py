"""A backend's stderr on disk: one file per backend, rotated by size while it runs.

Each line is stamped with when it was read (UTC, as the journal writes time), and each start of
the backend begins with a line saying which `serve` started it, so one run can be told from the next.

The log is a convenience, never a reason for a backend to fail: an error opening or writing it
is reported once (through `report`) and the file is left alone until the backend's next start;
stderr is still kept in memory for `get_logs`. At most `LOG_ROTATE_BYTES` plus one line sits in
the current file, and the one before it is kept as `NAME.log.1`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from emceepee_cli.clock import now_iso

LOG_ROTATE_BYTES = 1024 * 1024


class LogFile:
    def __init__(self, path: Path | None, report: Callable[[str], None]) -> None:
        self.path = path
        self._report = report
        self._file: BinaryIO | None = None
        self._size = 0
        if path is not None:
            self._guard(self._open)
            self.write(f"--- started by emceepee (pid {os.getpid()}) ---")

    def __repr__(self) -> str:
        state = "open" if self._file else "closed"
        return f"<LogFile {self.path} {state} size={self._size}>"

    def write(self, line: str) -> None:
        if self._file is not None:
            data = f"{now_iso()} {line}\n".encode("utf-8", errors="replace")
            self._guard(lambda: self._write(data))

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def _write(self, data: bytes) -> None:
        assert self._file is not None
        self._file.write(data)
        self._size += len(data)
        if self._size > LOG_ROTATE_BYTES:
            self._rotate()

    def _open(self) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._file = open(fd, "ab", buffering=0)  # noqa: SIM115 - held open across writes
        self._size = os.fstat(fd).st_size
        if self._size > LOG_ROTATE_BYTES:
            self._rotate()

    def _rotate(self) -> None:
        assert self.path is not None
        self.close()
        self.path.replace(self.path.with_suffix(self.path.suffix + ".1"))
        self._open()

    def _guard(self, work: Callable[[], None]) -> None:
        try:
            work()
        except OSError as exc:
            self.close()
            self._report(
                f"cannot write the stderr log {self.path}: {exc.strerror or exc}; "
                "stderr is still kept in memory (get_logs) and the file is retried at the next start"
            )
