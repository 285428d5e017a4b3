"""A task or question named by the start of its id, as a person types it on the command line.

The ids are ULIDs (26 characters, in capitals): a whole one is taken as it is; a prefix is looked
up as a range of the table's primary key, never with a LIKE, which would read every row of a
long history.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlite_utils

from emceepee_cli.ids import resolve_prefix

ID_LENGTH = 26  # a whole ULID: no prefix to resolve


def resolve_id(
    db: sqlite_utils.Database,
    table: str,
    key: str,
    prefix: str,
    *,
    what: str,
    listing: str,
    also: Iterable[str] = (),
) -> str:
    """The id in `table` that `prefix` starts (or one of `also`: ids only this process knows); a
    NotFound or UsageError naming `what` it looked for and where those are `listing`ed."""
    if len(prefix) == ID_LENGTH:
        return prefix.upper()
    return resolve_prefix(prefix, [*ids_like(db, table, key, prefix), *also], what, listing)


def ids_like(db: sqlite_utils.Database, table: str, key: str, prefix: str) -> list[str]:
    """The ids in `table` that start with `prefix` (as typed, in capitals as ULIDs are, or in small
    letters), found as ranges of the primary key."""
    found: set[str] = set()
    typed = prefix.strip()
    for start in {typed, typed.upper(), typed.lower()} - {""}:
        end = start[:-1] + chr(ord(start[-1]) + 1)
        sql = f"SELECT {key} FROM {table} WHERE {key} >= ? AND {key} < ?"
        found.update(str(r[key]) for r in db.query(sql, [start, end]))
    return sorted(found)
