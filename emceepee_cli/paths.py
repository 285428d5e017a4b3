"""Where emceepee keeps its files.

Defaults come from platformdirs. `EMCEEPEE_HOME` relocates config and data together (tests use
it); `EMCEEPEE_CONFIG` and `EMCEEPEE_DB` override one file each. Folders are created 0700.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "emceepee"


def _home() -> Path | None:
    home = os.environ.get("EMCEEPEE_HOME")
    return Path(home).expanduser() if home else None


def config_path(override: str | Path | None = None) -> Path:
    """The config file: `--config`, else `EMCEEPEE_CONFIG`, else the user config dir."""
    if override:
        return Path(override).expanduser()
    if env := os.environ.get("EMCEEPEE_CONFIG"):
        return Path(env).expanduser()
    if home := _home():
        return home / "config.toml"
    return platformdirs.user_config_path(APP) / "config.toml"


def data_dir() -> Path:
    """The data folder (journal, backend logs, the install key)."""
    if home := _home():
        return home / "data"
    return platformdirs.user_data_path(APP)


def db_path(override: str | Path | None = None) -> Path:
    """The journal: `--db`, else `EMCEEPEE_DB`, else `journal.db` in the data folder."""
    if override:
        return Path(override).expanduser()
    if env := os.environ.get("EMCEEPEE_DB"):
        return Path(env).expanduser()
    return data_dir() / "journal.db"


def logs_dir() -> Path:
    """Per-backend stderr logs."""
    return data_dir() / "logs"


def runtime_dir() -> Path:
    """The fleet's folder: its socket and locks (emceepee_cli/rendezvous.py). Under EMCEEPEE_HOME
    when set (so two homes never meet one fleet), else in XDG_RUNTIME_DIR, else in the data folder."""
    if home := _home():
        return home / "run"
    if runtime := os.environ.get("XDG_RUNTIME_DIR"):
        return Path(runtime) / APP
    return data_dir() / "run"


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and parents) if needed; a folder we create is 0700."""
    if not path.exists():
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def unwritable_folder(path: Path) -> Path | None:
    """The folder that keeps this user from creating `path` (or a file beside it): the nearest of
    its folders that exists, when this user cannot write it; None when it can be written."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return None if os.access(folder, os.W_OK) else folder
