"""Ids: ULIDs in creation order, and the unique prefix a person types."""

from __future__ import annotations

import pytest

from emceepee_cli.errors import NotFound, UsageError
from emceepee_cli.ids import new_id, resolve_prefix


def test_ids_made_in_one_millisecond_still_sort_in_creation_order() -> None:
    made = [new_id() for _ in range(2000)]
    assert made == sorted(made) and len(set(made)) == len(made) and all(len(i) == 26 for i in made)


def test_a_unique_prefix_whatever_its_case_names_one_id() -> None:
    ids = ["01ABC", "01ABD", "01XYZ"]
    assert resolve_prefix(" 01x ", ids, "task") == "01XYZ"
    assert resolve_prefix("01abd", ids, "task") == "01ABD"


def test_an_unknown_ambiguous_or_empty_prefix_says_what_to_do() -> None:
    ids = [f"01AB{n}" for n in range(7)]
    with pytest.raises(NotFound) as unknown:
        resolve_prefix("ZZ", ids, "task", "list_tasks shows them.")
    with pytest.raises(UsageError) as ambiguous:
        resolve_prefix("01", ids, "task")
    with pytest.raises(UsageError, match="Give a task id"):
        resolve_prefix("  ", ids, "task")
    assert unknown.value.hint == "list_tasks shows them."
    assert ambiguous.value.message == "'01' matches 7 tasks: 01AB0, 01AB1, 01AB2, 01AB3, 01AB4 …."
    assert ambiguous.value.hint == "Type more of the id."
