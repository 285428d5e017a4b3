"""What a journal that cannot be used tells the user: which file, what is wrong, the command that fixes it.

SQLite's failures are sorted here, in one place, into the few a person can act on: locked by
another process, read-only (the file or its folder), a full disk, damaged (not a database, or cut
short); store/migrations.py adds one written by a newer emceepee. A file cut short inside its
last page is found here too (`torn`), before anything is written to it: SQLite reads the missing
tail as zeros and calls the file sound. The CLI stops on them (exit code 4); a `serve` that cannot
open its journal runs from memory instead and flags every reply with `serving_from_memory`.
Nothing here imports sqlite-utils: `store/inspect.py` uses it on the cheap path of a TAB press.
"""

from __future__ import annotations

import os
import shlex
import sqlite3
from pathlib import Path

from emceepee_cli import paths
from emceepee_cli.errors import JournalError

READ_ONLY = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM")
NO_SPACE = ("SQLITE_FULL", "SQLITE_IOERR")
DAMAGED = ("SQLITE_NOTADB", "SQLITE_CORRUPT")


def journal_error(exc: sqlite3.Error, path: Path | str) -> JournalError:
    """SQLite's failure as a JournalError that names the file and the next thing to do."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    if is_busy(exc):
        return JournalError(
            f"The journal {path} is locked by another process ({exc}).",
            hint="Try again in a moment; if it persists, stop other emceepee processes.",
        )
    if name.startswith(READ_ONLY):
        return read_only(Path(path), f"{exc} ({name})")
    if name.startswith(NO_SPACE):
        return JournalError(
            f"The journal {path} could not be written: {exc} ({name}).",
            hint="Check the free space on its disk, and that the file and its folder are writable.",
        )
    if isinstance(exc, sqlite3.OperationalError) and not name.startswith(DAMAGED):
        return JournalError(
            f"The journal {path} could not be used: {exc}", hint="Check the file and its folder."
        )
    return damaged(path, str(exc))


def damaged(path: Path | str, why: str) -> JournalError:
    """The journal file is damaged: keep it aside, and let emceepee start a new one."""
    return JournalError(
        f"The journal {path} is not a usable SQLite file (damaged or cut short): {why}",
        hint=f"{move_aside(path)} (emceepee then starts a new one; the old file stays there to look at).",
    )


def torn(path: Path, page_size: int) -> JournalError | None:
    """Why the journal at `path` is damaged by its size alone, or None; `page_size` is the one in
    its header (`PRAGMA page_size`, read when SQLite opened it).

    SQLite rounds a file's page count up and reads a missing tail as zeros, so a file cut short
    inside its last page passes `PRAGMA quick_check`, and a write would build on the zeros. The
    main file of a WAL journal only ever grows or shrinks by whole pages: any other size is damage.
    An empty file is a journal not created yet. The size is all this looks at: opening the file
    here, as SQLite has it open, and closing it would drop SQLite's locks on it (POSIX locks
    belong to the process, and go with any of its descriptors).
    """
    try:
        size = os.stat(path).st_size
    except OSError:  # gone meanwhile: opening it says why
        return None
    if size == 0 or (size >= page_size and size % page_size == 0):
        return None
    return damaged(path, f"it is {size} bytes long, not a whole number of its {page_size}-byte pages")


def read_only(path: Path, why: str) -> JournalError:
    """The journal (or its folder) cannot be written by this user. The fix names what exists:
    the file, and its folder (or, when that is not there yet, the folder it would be made in)."""
    folder = paths.unwritable_folder(path) or path.parent
    targets = [p for p in (path, folder) if p.exists()] or [folder]
    return JournalError(
        f"The journal {path} cannot be opened for writing: {why}.",
        hint=f"chmod u+w {shlex.join(str(p) for p in targets)} (the journal and its "
        "folder must be writable), or use another journal with --db / EMCEEPEE_DB.",
    )


def writable_problem(path: Path) -> JournalError | None:
    """Why this user cannot write the journal at `path` (the file, or the folder its `-wal` and
    `-shm` go in, or the folder that one would be made in), or None. SQLite would open a
    read-only file without a word; only the first write would fail."""
    if path.exists() and not os.access(path, os.W_OK):
        return read_only(path, "the file is not writable by this user")
    folder = paths.unwritable_folder(path)
    if folder is not None:
        return read_only(path, f"its folder {folder} is not writable by this user")
    return None


def move_aside(path: Path | str) -> str:
    """The command that keeps a damaged journal for a look later and lets emceepee start afresh."""
    return f"mv {shlex.quote(str(path))} {shlex.quote(f'{path}.broken')}"


def is_busy(exc: sqlite3.Error) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def serving_from_memory(fault: JournalError) -> JournalError:
    """What `serve` says on every reply when it could not open its journal and runs from memory."""
    meanwhile = (
        "Then restart your MCP host (emceepee doctor checks the journal). Until then emceepee keeps "
        "this session's tasks, results and answers in memory only: the CLI does not see them and they "
        "are lost when the host stops it; the journal file is left as it is."
    )
    return JournalError(fault.message, hint=f"{fault.hint} {meanwhile}" if fault.hint else meanwhile)
