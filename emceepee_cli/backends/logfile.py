"""A backend's stderr on disk: one file per backend, rotated by size while it runs.

Each line is stamped with when it was read (UTC, as the journal writes time), and each start of
the backend begins with a line saying which command started it (`emceepee serve`, or `emceepee
call`, `tools` or `doctor`, which start backends of their own) and its pid, so one run can be told
from the next. Several processes may write one backend's log at once (a serve, and a `call` in a
terminal): each appends whole lines.

The log is a convenience, never a reason for a backend to fail: an error opening or writing it
is reported once (through `report`) and the file is left alone until the backend's next start;
stderr is still kept in memory for `get_logs`. At most `LOG_ROTATE_BYTES` plus one line sits in
the current file; rotating works as `logging.handlers.RotatingFileHandler` does: the file becomes
`NAME.log.1`, the one before it `NAME.log.2`, and so on up to `backups` files (`[defaults]
log_backups` in the config), the oldest dropped. A writer whose file another process rotated
meanwhile opens the new file instead of rotating again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from emceepee_cli.clock import now_iso

LOG_ROTATE_BYTES = 1024 * 1024
SERVE = "emceepee serve"


@dataclass(frozen=True)
class LogFolder:
    """Where the backends' stderr logs go, how many rotated files each keeps, and which command
    starts the backends (named at each start)."""

    path: Path
    backups: int = 1
    starter: str = SERVE

    def of(self, server: str) -> LogPlace:
        return LogPlace(self.path / f"{server}.log", self.backups, self.starter)


@dataclass(frozen=True)
class LogPlace:
    """One backend's log file, and how it is kept (as its `LogFolder` says)."""

    path: Path
    backups: int = 1
    starter: str = SERVE


def rotated(path: Path, backups: int) -> list[Path]:
    """The rotated files of the log `path`, newest first: `NAME.log.1` … `NAME.log.{backups}`."""
    return [path.with_name(f"{path.name}.{n}") for n in range(1, backups + 1)]


class LogFile:
    def __init__(self, place: LogPlace | None, report: Callable[[str], None]) -> None:
        self.path = place.path if place is not None else None
        self.backups = max(1, place.backups) if place is not None else 1
        self._report = report
        self._file: BinaryIO | None = None
        self._size = 0
        if place is not None:
            self._guard(self._open)
            self.write(f"--- started by {place.starter} (pid {os.getpid()}) ---")

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
        """Shift the rotated files up by one and start a new file; or, when another writer rotated
        the file meanwhile, go on in the new one it started."""
        assert self.path is not None and self._file is not None
        mine = os.fstat(self._file.fileno())
        self.close()
        try:
            now = os.stat(self.path)
        except FileNotFoundError:
            now = None
        if now is not None and (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
            older = rotated(self.path, self.backups)
            for newer, older_one in reversed(list(zip([self.path, *older], older, strict=False))):
                with contextlib.suppress(FileNotFoundError):
                    newer.replace(older_one)
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
