"""Results on their way to the host, held within one budget of memory for the whole process.

A backend's result taken raw by the fast lane (calls/raw_step.py) is held from the moment it is
read until its reply is written to the host, which may read slowly. `BUDGET` bounds the bytes
of all such results held in memory at once (`BUDGET_BYTES`): a result that would go over it is
written to a private file (0600, in a 0700 `spool` folder of emceepee's data folder) and the
bytes are dropped; the reply is then written from the file, a chunk at a time. When no file can be
written there (a read-only data folder, a full disk), the result stays in memory over the budget.

A result journaled as the host's bytes (a task's, store/tables/results.py) is read back for its reply
the same way, within the same budget (`Budget.hold_read`).

Lifecycle: `Budget.hold` (or `hold_read`) returns a `Held`; whoever delivers it calls `release` once it is
written (or turned into a model), which gives its bytes back to the budget or deletes its
file. A `Held` dropped without that (a call cancelled between the backend's answer and the
reply) is released when it is collected, so the budget never leaks. Spool files left by a
process that died are removed at the next start (`Budget.sweep`).

`give_back` returns the memory a big result used to the system, and `map_big_allocations` (at
start) keeps that possible for the allocations of every thread: see their docstrings.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import io
import logging
import os
import sys
import tempfile
import weakref
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, cast

import anyio.to_thread

from emceepee_cli import paths

log = logging.getLogger(__name__)

BUDGET_BYTES = 128 * 1024 * 1024  # results held in memory at once, all calls together
BUDGET_ENV = "EMCEEPEE_RESULT_BUDGET_MB"  # in serve's environment: another budget, in MiB
BIG_BYTES = 8 * 1024 * 1024  # a result at least this big is worth giving memory back after
CHUNK_BYTES = 1024 * 1024  # a spooled reply is read back this much at a time
PREFIX = "result-"


class Held:
    """One result's bytes: in memory (counted in the budget) or in a spool file."""

    def __init__(self, budget: Budget, data: bytes | None, path: Path | None, size: int) -> None:
        self.size = size
        self._data = data
        self.path = path
        counted = size if data is not None else 0
        self._release = weakref.finalize(self, budget.give, counted, path)

    def __repr__(self) -> str:
        where = "memory" if self._data is not None else str(self.path)
        return f"<Held {self.size} bytes in {where} released={not self._release.alive}>"

    def chunks(self) -> Iterator[bytes]:
        """The bytes, in pieces of at most CHUNK_BYTES when spooled (whole when in memory)."""
        if self._data is not None:
            yield self._data
            return
        assert self.path is not None
        with self.path.open("rb") as spooled:
            while piece := spooled.read(CHUNK_BYTES):
                yield piece

    def read(self) -> bytes:
        """The bytes, whole (for a model; a reply is written from `chunks`)."""
        return self._data if self._data is not None else b"".join(self.chunks())

    def release(self) -> None:
        """Delivered: give its bytes back to the budget, or delete its file. Idempotent."""
        self._data = None
        self._release()


class Budget:
    def __init__(self, limit: int = BUDGET_BYTES, directory: Path | None = None) -> None:
        self.limit = limit
        self.directory = directory  # None: `spool` in emceepee's data folder, looked up when first used
        self.held = 0  # bytes of results in memory now
        self.spooled = 0  # results written to files so far (for tests and logs)

    def __repr__(self) -> str:
        return f"<Budget held={self.held} limit={self.limit} spooled={self.spooled}>"

    async def hold(self, data: bytes) -> Held:
        """Keep `data` until it is delivered: in memory within the budget, else in a spool file
        (written in a worker thread; the bytes are dropped once it is written)."""
        if self.held + len(data) <= self.limit:
            self.held += len(data)
            return Held(self, data, None, len(data))
        try:
            path = await anyio.to_thread.run_sync(self._spool, data)
        except OSError as exc:  # a read-only data folder, a full disk: over the budget, not lost
            log.warning(
                "a result of %d bytes is held in memory over the budget: it cannot be spooled to %s (%s)",
                len(data),
                self._where(),
                exc.strerror or exc,
            )
            self.held += len(data)
            return Held(self, data, None, len(data))
        self.spooled += 1
        log.info(
            "a result of %d bytes is spooled to %s (results in memory: %d bytes)", len(data), path, self.held
        )
        return Held(self, None, path, len(data))

    async def hold_read(self, size: int, read: Callable[[BinaryIO], Awaitable[int]]) -> Held:
        """Keep `size` bytes that `read` copies into the file it is given (a journaled result,
        store/tables/results.py): into memory within the budget, else straight into a spool file, so a
        result read back is never whole in memory twice. `read` says how many bytes it copied;
        fewer than `size` (the result went meanwhile) raises LookupError."""
        if self.held + size <= self.limit:
            self.held += size  # reserved while it is read
            sink = io.BytesIO()
            try:
                copied = await read(sink)
            except BaseException:
                self.held -= size
                raise
            if copied != size:
                self.held -= size
                raise LookupError(f"a journaled result of {size} bytes went while it was read")
            return Held(self, sink.getvalue(), None, size)
        fd, name = tempfile.mkstemp(prefix=f"{PREFIX}{os.getpid()}-", dir=self._folder())  # 0600
        copied = 0
        try:
            with os.fdopen(fd, "wb") as out:
                copied = await read(out)
        finally:
            if copied != size:
                self.give(0, Path(name))  # deletes it
        if copied != size:
            raise LookupError(f"a journaled result of {size} bytes went while it was read")
        self.spooled += 1
        return Held(self, None, Path(name), size)

    def give(self, counted: int, path: Path | None) -> None:
        self.held -= counted
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def sweep(self) -> None:
        """Remove spool files a process that died left behind (a live one holds its own open).
        Never makes the folder; one it cannot read or write is left as it is."""
        try:
            left = list(self._where().glob(f"{PREFIX}*"))
        except OSError:
            return
        for stale in left:
            pid = stale.name[len(PREFIX) :].split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    stale.unlink()

    def _spool(self, data: bytes) -> Path:
        fd, name = tempfile.mkstemp(prefix=f"{PREFIX}{os.getpid()}-", dir=self._folder())  # 0600
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        except BaseException:
            Path(name).unlink(missing_ok=True)
            raise
        return Path(name)

    def _folder(self) -> Path:
        return paths.ensure_private_dir(self._where())

    def _where(self) -> Path:
        if self.directory is None:
            self.directory = paths.data_dir() / "spool"
        return self.directory


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _budget_bytes() -> int:
    value = os.environ.get(BUDGET_ENV, "")
    try:
        return max(0, int(float(value) * 1024 * 1024)) if value else BUDGET_BYTES
    except (ValueError, OverflowError):  # not a number, NaN, or infinite
        log.warning("%s=%r is not a number of MiB; the budget is %d bytes", BUDGET_ENV, value, BUDGET_BYTES)
        return BUDGET_BYTES


BUDGET = Budget(_budget_bytes())


def _glibc(name: str) -> Any:
    """A function of glibc's, where there is one (not on macOS, Windows or musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return getattr(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"), name)
    except (OSError, AttributeError):
        return None


def _malloc_trim() -> Callable[[int], int] | None:
    trim = _glibc("malloc_trim")
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return cast("Callable[[int], int] | None", trim)


_TRIM = _malloc_trim()
M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)
MAPPED_BYTES = 4 * 1024 * 1024  # an allocation this big gets pages of its own


def map_big_allocations() -> None:
    """Give every allocation of MAPPED_BYTES or more its own pages, unmapped when it is freed.

    glibc raises its mmap threshold each time it frees a mapped block (to 32 MiB at most), and its
    trim threshold to twice that; past that, a big result's copies come from the heaps. The top
    of a worker thread's heap (where SQLite and the journal's thread put what they allocate) is
    never trimmed below that threshold, not even by `malloc_trim`: a journaled result's record
    would stay resident. A fixed threshold keeps both low. serve calls this once, at start."""
    mallopt = _glibc("mallopt")
    if mallopt is not None:
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        mallopt(M_MMAP_THRESHOLD, MAPPED_BYTES)


def give_back(size: int) -> None:
    """After a result of `size` bytes was delivered, return the memory it used to the system.

    A big result is read from the backend 64 KiB at a time: those pieces come from the C heap,
    not from separate mappings, and when they are freed glibc keeps the pages unless they are at
    the heap's top, so serve's RSS would stay at its peak. `malloc_trim(0)` hands every free page
    of the heap back. A collection first frees what a cycle still held (the models of the slow
    path); `gc.freeze()` at start keeps it cheap. Skipped for small results: both cost a few
    milliseconds. Elsewhere (no glibc) only the collection runs.
    """
    if size < BIG_BYTES:
        return
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)
