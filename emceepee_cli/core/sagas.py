"""Saga tokens: a suspended task, handed to the model as something it can resume.

A token names the task and the steps (pending questions) it was suspended on, with an expiry,
signed with HMAC-SHA256 under a per-install key (a 0600 file in the data folder, made on first
use). `resume_tool` accepts only a token this install signed, unaltered and unexpired.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from emceepee_cli import paths
from emceepee_cli.errors import UsageError
from emceepee_cli.store.records import QuestionJson

TOKEN_TTL_S = 3600.0
KEY_FILE = "install.key"


def install_key(folder: Path | None = None) -> bytes:
    path = paths.ensure_private_dir(folder or paths.data_dir()) / KEY_FILE
    try:
        return bytes.fromhex(path.read_text().strip())
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return bytes.fromhex(path.read_text().strip())
    with os.fdopen(fd, "w") as f:
        f.write(key.hex())
    return key


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(key: bytes, task_id: str, step_ids: list[str], ttl_s: float = TOKEN_TTL_S) -> str:
    body = _b64(
        json.dumps(
            {"t": task_id, "s": step_ids, "exp": int(time.time() + ttl_s)}, separators=(",", ":")
        ).encode()
    )
    mac = _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())
    return f"{body}.{mac}"


def verify(key: bytes, token: str) -> dict[str, Any]:
    """The token's claims {t: task id, s: step ids, exp}; a UsageError if forged, altered or expired."""
    body, _, mac = token.strip().partition(".")
    expected = _b64(hmac.new(key, body.encode(), hashlib.sha256).digest())
    if not mac or not hmac.compare_digest(mac, expected):
        raise UsageError(
            "This saga_token was not issued by this emceepee, or was altered.",
            hint="Use the saga_token exactly as get_task or execute_tool returned it.",
        )
    claims: dict[str, Any] = json.loads(_unb64(body))
    if claims["exp"] < time.time():
        raise UsageError(
            "This saga_token has expired.",
            hint="get_task(task_id) gives a fresh one while the task is suspended.",
        )
    return claims


def view(key: bytes, task_id: str, questions: list[QuestionJson]) -> dict[str, Any]:
    """A task blocked on `questions`, as a saga the model can resume; empty when there are none."""
    steps = [{"type": q["kind"], "step_id": q["request_id"], "params": q} for q in questions]
    if not steps:
        return {}
    token = sign(key, task_id, [q["request_id"] for q in questions])
    return {"saga": {"state": "suspended", "saga_token": token, "steps": steps}}


def check_steps(claims: dict[str, Any], steps: list[dict[str, Any]]) -> None:
    """Every step answered must be one the token names."""
    for step in steps:
        if step["step_id"] not in claims["s"]:
            raise UsageError(
                f"Step {step['step_id']} is not one of this saga's steps ({', '.join(claims['s'])})."
            )
