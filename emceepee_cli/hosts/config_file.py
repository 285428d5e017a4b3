"""A host's JSON config file: read (comments and trailing commas allowed), edited where it changed,
backed up, replaced atomically.

Only the members emceepee changes are rewritten (hosts/jsonc_edit.py): every other byte of the file
(comments, indentation, order, line endings) stays as it was, so a diff of the change shows
only emceepee's entry and the servers it removed. A file that is not JSON, does not hold an
object, or writes a key emceepee would change twice is never written: `Uneditable` says why,
and the command says what to paste by hand instead. If the file changes between reading and
writing (the host saved it), the edit is made again on the new text when that text still says
the same; otherwise nothing is written.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from emceepee_cli.errors import ConfigError
from emceepee_cli.hosts import jsonc, jsonc_edit


class Uneditable(ConfigError):
    """The host's file cannot be read or edited safely; nothing was changed."""


@dataclass
class HostFile:
    path: Path
    data: dict[str, Any] = field(default_factory=dict)  # what the file says, as changed so far
    text: str | None = None  # as read; None when the file does not exist
    read_as: dict[str, Any] = field(default_factory=dict)  # what the file said when read

    @property
    def exists(self) -> bool:
        return self.text is not None

    def servers(self, key: str) -> dict[str, Any]:
        """The object of server entries under `key` (created when missing)."""
        servers = self.data.setdefault(key, {})
        if not isinstance(servers, dict):
            raise Uneditable(
                f"In {self.path}, '{key}' is not an object (it is {type(servers).__name__}).",
                hint="Fix it by hand, or point at another file with --file. Nothing was changed.",
            )
        return cast(dict[str, Any], servers)

    def rendered(self) -> str:
        """The file's new text: the old one with the changed members rewritten."""
        if self.text is None or not self.text.strip():
            return jsonc_edit.render(self.data, jsonc_edit.Style.of(self.text or "")) + "\n"
        try:
            return jsonc_edit.edited(self.text, self.data)
        except jsonc.JsoncError as exc:
            raise _uneditable(self.path, exc) from None

    def diff(self) -> str:
        before = (self.text or "").splitlines(keepends=True)
        after = self.rendered().splitlines(keepends=True)
        return "".join(difflib.unified_diff(before, after, f"{self.path} (now)", f"{self.path} (after)"))

    def changed(self) -> bool:
        return self.text is None or self.data != self.read_as


def read(path: Path) -> HostFile:
    text = _text(path)
    if text is None:
        return HostFile(path)
    if not text.strip():
        return HostFile(path, {}, text)
    try:
        data = jsonc.parse(text).data
    except jsonc.JsoncError as exc:
        raise Uneditable(
            f"{path} is not valid JSON: {exc.message}.",
            hint="Fix the file (or move it aside) and try again. Nothing was changed.",
        ) from None
    if not isinstance(data, dict):
        raise Uneditable(
            f"{path} does not hold a JSON object (it holds {type(data).__name__}).",
            hint="Fix the file. Nothing was changed.",
        )
    return HostFile(path, cast(dict[str, Any], data), text, copy.deepcopy(data))


def write(host_file: HostFile) -> Path | None:
    """Replace the file with its new content; the backup made of the old one, if there was one."""
    path = host_file.path
    target = Path(os.path.realpath(path))  # a link to the file stays a link
    new = host_file.rendered()
    current = _text(path)
    if current != host_file.text:
        new = _again(host_file, current)
    backup = _backup(path) if current is not None else None
    mode = target.stat().st_mode & 0o777 if current is not None else 0o600
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise ConfigError(
            f"Cannot write {path}: {exc.strerror}.", hint="Check the folder's permissions."
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fp:
            fp.write(new)
            fp.flush()
            os.fsync(fp.fileno())
        os.chmod(tmp, mode)
        _replace(tmp, target, current)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    host_file.text, host_file.read_as = new, copy.deepcopy(host_file.data)
    return backup


def _replace(tmp: str, target: Path, before: str | None) -> None:
    """Put `tmp` in place of `target`, unless someone saved `target` since it was `before`."""
    if _text(target) != before:
        raise _changed(target)
    os.replace(tmp, target)


def _again(host_file: HostFile, current: str | None) -> str:
    """The edit made again on the file as it is now, which changed since it was read; refused
    unless it still says what it said (only its comments or layout changed)."""
    said = HostFile(host_file.path) if current is None else read(host_file.path)
    if current is None or said.data != host_file.read_as:
        raise _changed(host_file.path)
    return HostFile(host_file.path, host_file.data, current, said.data).rendered()


def _changed(path: Path) -> ConfigError:
    return ConfigError(
        f"{path} changed while emceepee was editing it; nothing was written to it.",
        hint="Run the command again (the host may have saved it just then).",
    )


def _text(path: Path) -> str | None:
    try:
        with path.open(encoding="utf-8", newline="") as fp:  # line endings as they are
            return fp.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"Cannot read {path}: {exc}.", hint="Check the file's permissions.") from None


def _uneditable(path: Path, exc: jsonc.JsoncError) -> Uneditable:
    return Uneditable(
        f"{path} cannot be edited safely: {exc.message}.",
        hint="Nothing was changed. Fix that in the file and try again.",
    )


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
