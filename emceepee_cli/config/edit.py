"""The config file's text with one [servers.NAME] table put in, changed or taken out; every other
byte as it was.

A server written as its own block (`[servers.NAME]`, and its sub-tables such as
`[servers.NAME.env]`, one after the other) is edited as that block alone, by tomlkit: a key the
table keeps keeps its comment and layout, a key it loses goes with its line, a new key goes
after the last one. A new server goes after the last [servers.…] table, or at the end. Taking a
server out takes its block and the comment lines right above its header (no blank line between).
A server written another way (an inline table, dotted keys, tables split apart) is edited through
tomlkit's model of the whole file. Either way the result must read (tomllib) as the old file with
only that change, else `Unedited` is raised with what to do by hand. New lines take the file's
line ending (CRLF in a CRLF file).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from typing import Any

from emceepee_cli.config.layout import last_block_end, lines, table_block
from emceepee_cli.errors import ConfigError

_LONE_LF = re.compile(r"(?<!\r)\n")
_BLANK_LINES = re.compile(r"(?:[ \t]*\r?\n)*")
_TRAILING_BLANK_LINES = re.compile(r"(?<=\n)(?:[ \t]*\r?\n)+\Z")


class Unedited(ConfigError):
    """The file cannot take the change without other parts of it changing too."""


def put_server(text: str, doc: dict[str, Any], name: str, table: dict[str, Any]) -> str:
    """`text` (which reads as `doc`) with [servers.NAME] holding exactly `table` (added, or changed
    key by key)."""
    expected = {**doc, "servers": {**doc.get("servers", {}), name: table}}
    for attempt in (_put_in_block, _put_in_document):
        edited = _tried(attempt, text, doc, name, table)
        if edited is not None and _reads_as(edited, expected):
            return edited
    raise Unedited(
        f"[servers.{name}] cannot be written without changing other parts of the file "
        "(its servers are laid out in a way emceepee does not edit).",
        hint="Nothing was written. Put this table in the file yourself:\n\n" + new_block(name, table),
    )


def drop_server(text: str, doc: dict[str, Any], name: str) -> str:
    """`text` (which reads as `doc`) without [servers.NAME]."""
    expected = {**doc, "servers": {key: value for key, value in doc["servers"].items() if key != name}}
    for attempt in (_drop_block, _drop_in_document):
        edited = _tried(attempt, text, name)
        if edited is not None and _reads_as(edited, expected):
            return edited
    raise Unedited(
        f"[servers.{name}] cannot be taken out without changing other parts of the file.",
        hint=f"Nothing was written. Delete the [servers.{name}] table from the file yourself.",
    )


def _tried(attempt: Callable[..., str | None], *args: Any) -> str | None:
    """What `attempt` makes of the text, or None where tomlkit cannot make sense of it."""
    from tomlkit.exceptions import TOMLKitError

    try:
        return attempt(*args)
    except (TOMLKitError, LookupError, TypeError, ValueError):
        return None


def new_block(name: str, table: dict[str, Any]) -> str:
    """[servers.NAME] as a block of its own, its tables (env, headers, tools) inline."""
    import tomlkit

    doc = tomlkit.document()
    servers = tomlkit.table(is_super_table=True)
    servers.add(name, _table(table))
    doc.add("servers", servers)
    return tomlkit.dumps(doc)


def _put_in_block(text: str, doc: dict[str, Any], name: str, table: dict[str, Any]) -> str | None:
    found = lines(text)
    block = table_block(found, ("servers", name))
    if block is not None:
        keys = text[block.start : block.keys_end]  # the comments under its last key stay under it
        return _splice(text, block.start, block.keys_end, _edited(keys, name, table))
    if name in (doc.get("servers") or {}):
        return None  # it is there, but not as a block of its own
    at = last_block_end(found, ("servers",))
    return _insert_block(text, len(text) if at is None else at, new_block(name, table))


def _edited(piece: str, name: str, table: dict[str, Any]) -> str:
    import tomlkit

    doc = tomlkit.parse(piece)
    _update(doc["servers"][name], table)
    return tomlkit.dumps(doc)


def _put_in_document(text: str, _doc: dict[str, Any], name: str, table: dict[str, Any]) -> str | None:
    import tomlkit

    doc = tomlkit.parse(text)
    if "servers" not in doc:
        doc.add("servers", tomlkit.table(is_super_table=True))
    servers = doc["servers"]
    if name in servers:
        _update(servers[name], table)
    else:
        servers[name] = _inline(table) if isinstance(servers, tomlkit.items.InlineTable) else _table(table)
    return _in_newline_of(text, tomlkit.dumps(doc))


def _drop_block(text: str, name: str) -> str | None:
    found = lines(text)
    block = table_block(found, ("servers", name))
    if block is None:
        return None
    start, end = block.comments_start, block.end
    head, tail = text[:start], text[end:]
    if not tail.strip():  # the last thing in the file: no blank lines left at the end either
        return _TRAILING_BLANK_LINES.sub("", head)
    if not head or _TRAILING_BLANK_LINES.search(head):
        tail = tail[_BLANK_LINES.match(tail).end() :]  # type: ignore[union-attr]  # matches ""
    return head + tail


def _drop_in_document(text: str, name: str) -> str | None:
    import tomlkit

    doc = tomlkit.parse(text)
    del doc["servers"][name]
    return _in_newline_of(text, tomlkit.dumps(doc))


def _update(item: Any, wanted: dict[str, Any]) -> None:
    """Make the tomlkit table `item` hold `wanted`, touching only the keys that differ."""
    import tomlkit

    for key in [key for key in item if key not in wanted]:
        del item[key]
    for key, value in wanted.items():
        current = item.get(key)
        if key in item and plain(current) == value:
            continue
        if isinstance(value, dict) and isinstance(current, tomlkit.items.Table):
            _update(current, value)  # a [servers.NAME.env] sub-table stays one
        elif isinstance(value, dict):
            item[key] = _inline(value)
        else:
            item[key] = value


def _table(values: dict[str, Any]) -> Any:
    import tomlkit

    table = tomlkit.table()
    for key, value in values.items():
        table.add(key, _inline(value) if isinstance(value, dict) else value)
    return table


def _inline(values: dict[str, Any]) -> Any:
    import tomlkit

    table = tomlkit.inline_table()
    for key, value in values.items():
        table.append(key, _inline(value) if isinstance(value, dict) else value)
    return table


def plain(value: Any) -> Any:
    """A tomlkit value as the plain Python value tomllib would read."""
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return value


def _insert_block(text: str, at: int, block: str) -> str:
    """`text` with `block` inserted at `at` (a line's start, or the end), one blank line above it."""
    before = text[:at]
    if before and not before.endswith("\n"):
        block = "\n\n" + block
    elif before and not _TRAILING_BLANK_LINES.search(before):
        block = "\n" + block
    return _splice(text, at, at, block)


def _splice(text: str, start: int, end: int, new: str) -> str:
    """`text` with `text[start:end]` replaced by `new`, in the file's line ending."""
    if _newline(text) == "\r\n":
        new = _LONE_LF.sub("\r\n", new)
    return text[:start] + new + text[end:]


def _in_newline_of(old: str, new: str) -> str:
    """`new` with CRLF line endings if `old` had only those."""
    return _LONE_LF.sub("\r\n", new) if "\r\n" in old and not _LONE_LF.search(old) else new


def _newline(text: str) -> str:
    return "\r\n" if text.count("\r\n") * 2 > text.count("\n") else "\n"


def _reads_as(text: str, expected: dict[str, Any]) -> bool:
    try:
        got = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    return bool(_settled(got) == _settled(expected))


def _settled(data: dict[str, Any]) -> dict[str, Any]:
    """An empty `servers` table and none at all read the same."""
    return {key: value for key, value in data.items() if not (key == "servers" and value == {})}
