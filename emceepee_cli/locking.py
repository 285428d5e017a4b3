"""An exclusive lock for read-modify-write of a small file, held on a sibling `NAME.lock`.

The lock is an advisory `flock` on the sibling (never on the file itself, which is replaced
atomically and so changes inode under the lock). The kernel drops it when its holder exits, so
a crashed writer never leaves a stale lock. Where fcntl does not exist (Windows) it is a no-op.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from emceepee_cli import paths
from emceepee_cli.errors import ConfigError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]  # no fcntl on Windows: the lock is a no-op there

LOCK_WAIT_S = 10.0  # a write takes milliseconds; a lock held this long belongs to a stuck process
LOCK_POLL_S = 0.01


def lock_path(path: Path) -> Path:
    """The sibling file every writer of `path` locks."""
    return path.with_name(path.name + ".lock")


@contextlib.contextmanager
def locked(path: Path, wait_s: float | None = None) -> Iterator[None]:
    """Hold `path`'s write lock, waiting at most `wait_s` (default `LOCK_WAIT_S`); else a `ConfigError`."""
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    if fcntl is None:  # concurrent edits can still race there
        yield
        return
    lock = lock_path(path)
    try:
        paths.ensure_private_dir(path.parent)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        hint = "Check the folder's permissions, or point EMCEEPEE_CONFIG at another file."
        raise ConfigError(f"Cannot lock {path} (with {lock}): {exc.strerror}.", hint=hint) from None
    try:
        deadline = time.monotonic() + wait_s
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"{path} is being edited by another process: "
                    f"its lock {lock} was held for over {wait_s:g} s.",
                    hint="Try again in a moment; if it stays locked, stop the stuck `emceepee` process.",
                )
            time.sleep(LOCK_POLL_S)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _try_lock(fd: int) -> bool:
    assert fcntl is not None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
