"""A host's JSON config file: read (comments allowed), changed as a whole, backed up, replaced atomically.

Every key emceepee does not touch is kept as it was, in its order. A file with comments (VS
Code's files allow them) is read, but JSON cannot carry them back: the rewrite drops them and
says so, and the backup keeps the original. A file that cannot be parsed is never rewritten.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from emceepee_cli.errors import ConfigError

# A string, or a comment, or a comma before a closing bracket: strings are matched first so that
# "//" or "/*" inside one is left alone.
_JSONC = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.DOTALL)


@dataclass
class HostFile:
    path: Path
    data: dict[str, Any] = field(default_factory=dict)
    text: str | None = None  # as read; None when the file does not exist
    had_comments: bool = False

    @property
    def exists(self) -> bool:
        return self.text is not None

    def servers(self, key: str) -> dict[str, Any]:
        """The object of server entries under `key` (created when missing)."""
        servers = self.data.setdefault(key, {})
        if not isinstance(servers, dict):
            raise ConfigError(
                f"In {self.path}, '{key}' is not an object (it is {type(servers).__name__}).",
                hint="Fix it by hand, or point at another file with --file. Nothing was changed.",
            )
        return cast(dict[str, Any], servers)

    def rendered(self) -> str:
        return json.dumps(self.data, indent=2, ensure_ascii=False) + "\n"

    def diff(self) -> str:
        before = (self.text or "").splitlines(keepends=True)
        after = self.rendered().splitlines(keepends=True)
        return "".join(difflib.unified_diff(before, after, f"{self.path} (now)", f"{self.path} (after)"))

    def changed(self) -> bool:
        if self.text is None:
            return True
        try:
            return bool(json.loads(_strip(self.text)) != self.data)
        except ValueError:
            return True


def read(path: Path) -> HostFile:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return HostFile(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read {path}: {exc}.", hint="Check the file's permissions.") from None
    if not text.strip():
        return HostFile(path, {}, text)
    stripped = _strip(text)
    try:
        data = json.loads(stripped)
    except ValueError as exc:
        raise ConfigError(
            f"{path} is not valid JSON: {exc}.",
            hint="Fix the file (or move it aside) and try again. Nothing was changed.",
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} does not hold a JSON object.", hint="Fix the file. Nothing was changed.")
    return HostFile(path, cast(dict[str, Any], data), text, had_comments=stripped != text)


def write(host_file: HostFile) -> Path | None:
    """Replace the file with its new content; the backup made of the old one, if there was one."""
    path = host_file.path
    backup = _backup(path) if host_file.exists else None
    mode = path.stat().st_mode & 0o777 if host_file.exists else 0o600
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ConfigError(
            f"Cannot write {path}: {exc.strerror}.", hint="Check the folder's permissions."
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fp:
            fp.write(host_file.rendered())
            fp.flush()
            os.fsync(fp.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    host_file.text = host_file.rendered()
    return backup


def _backup(path: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.{stamp}.bak")
    n = 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.{stamp}-{n}.bak")
    try:
        shutil.copy2(path, backup)
    except OSError as exc:
        raise ConfigError(
            f"Cannot back up {path} to {backup}: {exc.strerror}. Nothing was changed.",
            hint="Check the folder's permissions and free space.",
        ) from None
    return backup


def _strip(text: str) -> str:
    """JSON with comments and trailing commas (as VS Code writes it) as plain JSON."""

    def keep_strings(match: re.Match[str]) -> str:
        token = match.group(0)
        return token if token.startswith('"') else ""

    return _JSONC.sub(keep_strings, text)
