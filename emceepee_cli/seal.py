"""Tokens emceepee signs: the per-install key, sealing and unsealing, and a task's resume token.

A sealed token is `prefix + body.mac`: the claims as JSON (base64url), signed with HMAC-SHA256
under the install key, a 0600 file in the data folder made on first use. Saga tokens
(questions/sagas.py) and emceepee's own resume tokens (calls/resume.py) are both sealed here; a claim
`p` keeps the kinds apart. Standard library only, so the CLI can show a task's resume token
without loading the MCP SDK.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shlex
from datetime import datetime
from pathlib import Path
from typing import Any

from emceepee_cli import paths
from emceepee_cli.errors import EmceepeeError
from emceepee_cli.store.records import TaskRow, TaskStatus

KEY_FILE = "install.key"
KEY_BYTES = 32
RESUME_PREFIX = "emp1."  # tells emceepee's resume tokens from a backend's without trying a MAC


class InstallKeyError(EmceepeeError):
    """The install key exists but cannot be used (not a file, unreadable, not a key)."""


def install_key(folder: Path | None = None) -> bytes:
    """This install's signing key, made on first use (0600); InstallKeyError if it cannot be used.

    A new key is written whole to a private file first and then linked into place, so no process
    ever reads a key half written; if another process linked its key first, that one is used."""
    where = folder or paths.data_dir()
    path = where / KEY_FILE
    try:
        paths.ensure_private_dir(where)
        return read_key(path)
    except FileNotFoundError:
        pass
    except OSError as exc:  # the folder cannot be made
        raise _cannot_make(path, exc) from exc
    key = secrets.token_bytes(KEY_BYTES)
    draft = where / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    try:
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key.hex())
            f.flush()
            os.fsync(f.fileno())
        os.link(draft, path)
    except FileExistsError:  # another process linked its key first: use theirs
        return read_key(path)
    except OSError as exc:  # a full disk, a folder we cannot write
        raise _cannot_make(path, exc) from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(draft)
    return key


def read_key(path: Path) -> bytes:
    """The key in `path`; FileNotFoundError if there is none, InstallKeyError if it cannot be used."""
    try:
        key = bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise _unusable(path, exc) from exc
    if len(key) != KEY_BYTES:
        raise _unusable(path, ValueError(f"{len(key)} bytes, not {KEY_BYTES}"))
    return key


def _unusable(path: Path, exc: Exception) -> InstallKeyError:
    return InstallKeyError(
        f"The install key {path} cannot be used: {exc}.",
        hint="Delete it to have emceepee make a new one (tokens signed with the old key stop working), "
        "or make it a file this user can read again.",
    )


def _cannot_make(path: Path, exc: OSError) -> InstallKeyError:
    folder = paths.unwritable_folder(path)
    if folder is not None:
        hint = f"chmod u+w {shlex.quote(str(folder))} (emceepee's data folder must be writable by this user)."
    else:
        hint = f"Make {path.parent} a folder this user can write, or free space on its disk."
    why = exc.strerror or exc
    return InstallKeyError(f"The install key {path} cannot be used: it could not be made ({why}).", hint=hint)


def seal(key: bytes, claims: dict[str, Any], prefix: str = "") -> str:
    """`prefix + body.mac`: the claims, signed under the install key (the prefix is signed too)."""
    body = _b64(json.dumps(claims, separators=(",", ":")).encode())
    mac = _b64(hmac.new(key, (prefix + body).encode(), hashlib.sha256).digest())
    return f"{prefix}{body}.{mac}"


def unseal(key: bytes, token: str, prefix: str = "") -> dict[str, Any] | None:
    """The claims of a token this install sealed with `prefix`, unaltered; None otherwise."""
    if not token.startswith(prefix):
        return None
    body, _, mac = token[len(prefix) :].partition(".")
    expected = _b64(hmac.new(key, (prefix + body).encode(), hashlib.sha256).digest())
    if not mac or not hmac.compare_digest(mac, expected):
        return None
    try:
        claims = json.loads(_unb64(body))
    except ValueError:
        return None
    return claims if isinstance(claims, dict) and isinstance(claims.get("exp"), int | float) else None


def call_digest(server: str, tool: str, args: dict[str, Any] | None) -> str:
    canonical = json.dumps([server, tool, args or {}], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def sign_resume(
    key: bytes, task_id: str, server: str, tool: str, args: dict[str, Any] | None, exp: float
) -> str:
    """emceepee's resume token for a task: it names the task and the call, and expires at `exp`."""
    claims = {"p": "resume", "t": task_id, "c": call_digest(server, tool, args), "exp": int(exp)}
    return seal(key, claims, RESUME_PREFIX)


def task_resume_token(key: bytes, row: TaskRow, retention_s: float) -> str | None:
    """The resume token `get_task` shows for a task, or None: while it works (with it,
    `execute_tool` waits for its result), and once interrupted holding a backend's resume token
    (with it, the call goes on from there). It expires when the finished task would be purged."""
    if not resumable(row):
        return None
    expires_at = row["expires_at"]  # every working task has one; else an hour after it began
    ends = (
        datetime.fromisoformat(expires_at).timestamp()
        if expires_at
        else datetime.fromisoformat(row["created_at"]).timestamp() + 3600
    )  # from the row alone, so the same task always gets the same token
    args = json.loads(row["args"] or "null")
    return sign_resume(key, row["task_id"], row["server"], row["tool"], args, ends + retention_s)


def resumable(row: TaskRow) -> bool:
    """The task has a resume token: it works, or it was interrupted holding a backend's token."""
    status = TaskStatus(row["status"])
    return status == TaskStatus.WORKING or (
        status == TaskStatus.INTERRUPTED and bool(row.get("resume_token"))
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
