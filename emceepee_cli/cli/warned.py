"""What the CLI has warned about already: a config file's problems are printed once per change.

`servers list` lists every server, the broken ones too; the problems of a file that has not
changed since they were last printed are not printed again, only counted (`servers show NAME`
and `doctor` still show them whenever asked). What was printed is remembered in the data
folder, as a hash of the file and its problems per config file, so a change to either (an edit,
or a `${VAR}` now set or unset) prints them again. Remembering is best effort: a data folder that
cannot be written means every listing prints them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path

from emceepee_cli import paths

STATE_FILE = "warned.json"
KEPT = 32  # config files remembered; the oldest is forgotten first


def _state_path() -> Path:
    return paths.data_dir() / STATE_FILE


def _read() -> dict[str, str]:
    try:
        found = json.loads(_state_path().read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _digest(config: Path, problems: list[str]) -> str:
    try:
        content = config.read_bytes()
    except OSError:
        content = b""
    return hashlib.sha256(content + b"\0" + "\n".join(problems).encode()).hexdigest()


def is_new(config: Path, problems: list[str]) -> bool:
    """Whether `problems` of `config` are to be printed (not printed since either changed);
    remembered as printed from now on."""
    if not problems:
        return False
    key, digest = str(config.resolve()), _digest(config, problems)
    state = _read()
    if state.get(key) == digest:
        return False
    state.pop(key, None)
    state[key] = digest
    _write(dict(list(state.items())[-KEPT:]))
    return True


def _write(state: dict[str, str]) -> None:
    path = _state_path()
    try:
        paths.ensure_private_dir(path.parent)
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{STATE_FILE}.")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as fp:
            json.dump(state, fp)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)
