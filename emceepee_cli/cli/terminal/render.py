"""The only place the CLI writes to the terminal.

Output adapts to where it goes. On a terminal a table fits its width (cells wrap; when the
columns cannot fit, each row is shown as a block of `label: value` lines) and headers and
warnings are coloured (unless NO_COLOR is set). In a pipe or a file everything is plain and
complete: nothing is cut or wrapped, whatever the width. With `--json` a command prints one JSON
document on stdout, the same objects the meta-tools return; an error then is a JSON object too
(`{"error": {"type", "message", "hint"}, "exit_code": N}`), so a script reads one document
whatever happened. Errors otherwise go to stderr as the message and the hint, never a traceback
(unless --verbose).

Nothing here imports rich: a table is laid out by `layout.py`, so a command's start-up pays for
nothing it does not print.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from emceepee_cli.cli.terminal import layout
from emceepee_cli.errors import EmceepeeError

_STYLES = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36", "dim": "2"}


def is_tty(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def width() -> int | None:
    """The terminal's columns when stdout is one; None (no limit) in a pipe or a file."""
    return shutil.get_terminal_size().columns if is_tty() else None


def _styled(text: str, style: str | None, stream: TextIO) -> str:
    if not style or not is_tty(stream) or os.environ.get("NO_COLOR"):
        return text
    codes = ";".join(_STYLES[part] for part in style.split() if part in _STYLES)
    return f"\x1b[{codes}m{text}\x1b[0m" if codes else text


def _write(text: str, stream: TextIO, end: str = "\n") -> None:
    stream.write(text + end)
    stream.flush()


def line(message: str = "", style: str | None = None) -> None:
    _write(_styled(message, style, sys.stdout), sys.stdout)


def note(message: str) -> None:
    """Something said about the output rather than part of it (to stderr, so pipes stay clean)."""
    _write(_styled(message, "dim", sys.stderr), sys.stderr)


def warn(message: str) -> None:
    _write(_styled(message, "yellow", sys.stderr), sys.stderr)


def status(message: str) -> None:
    """A transient line on stderr (progress): rewritten in place on a terminal, one line each in a pipe."""
    if is_tty(sys.stderr):
        columns = shutil.get_terminal_size().columns
        _write("\r\x1b[K" + message[: max(1, columns - 1)], sys.stderr, end="")
    else:
        _write(message, sys.stderr)


def clear_status() -> None:
    if is_tty(sys.stderr):
        _write("\r\x1b[K", sys.stderr, end="")


def ask(prompt: str) -> str:
    """One line typed at the terminal, after `prompt` (raises EOFError when input ends)."""
    _write(prompt, sys.stdout, end="")
    return input()


def as_json(value: Any) -> None:
    _write(json.dumps(value, indent=2, ensure_ascii=False, default=str), sys.stdout)


def json_line(value: Any) -> None:
    """One compact JSON document per line (for streams: `events -f --json`, `logs -f --json`)."""
    _write(json.dumps(value, ensure_ascii=False, default=str), sys.stdout)


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], empty: str) -> None:
    """Rows under a header; the first column (ids, names) is never wrapped: people copy it."""
    cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
    if not cells:
        line(empty)
        return
    if title:
        line(title, style="bold")
    shown = layout.table(list(columns), cells, width())
    header = not shown.records
    for i, text in enumerate(shown.lines):
        line(text, style="bold" if header and i == 0 else None)


def fields(pairs: Sequence[tuple[str, Any]]) -> None:
    """One object as `label: value` lines, values wrapped to the terminal's width."""
    for text in layout.record([(k, "" if v is None else str(v)) for k, v in pairs], width()):
        line(text)


def error(exc: EmceepeeError, as_json_error: bool = False) -> None:
    from emceepee_cli.redact import redact  # an error may quote a value a ${VAR} expanded to

    hint = exc.terminal_hint  # the next step as a command, where the error names it both ways
    if as_json_error:
        failure(type(exc).__name__, redact(exc.message), redact(hint) if hint else None, exc.exit_code)
        return
    _write(_styled(f"Error: {redact(exc.message)}", "bold red", sys.stderr), sys.stderr)
    if hint:
        _write(redact(hint), sys.stderr)


def failure(kind: str, message: str, hint: str | None, exit_code: int) -> None:
    """The JSON error document (the meta-tools' `{"error": …}`, plus the exit code)."""
    error_obj: dict[str, Any] = {"type": kind, "message": message}
    if hint:
        error_obj["hint"] = hint
    as_json({"error": error_obj, "exit_code": exit_code})
