"""Schema checks on what a host or backend sends: every wrong field named by its path; a schema or
a pattern that cannot be judged is not held against the value (the backend judges it)."""

from __future__ import annotations

import time

from emceepee_cli import schema

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Z]"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "age": {"type": "integer", "minimum": 0},
    },
    "required": ["name"],
    "additionalProperties": False,
}


def test_each_wrong_field_is_named_by_its_path() -> None:
    wrong = schema.problems({"name": "ada", "tags": ["x", 3], "age": -1, "extra": 1}, PERSON, root="content")
    assert wrong == [
        "content: Additional properties are not allowed ('extra' was unexpected)",
        "content.age: -1 is less than the minimum of 0",
        "content.name: \"ada\" does not match '^[A-Z]'",
        "content.tags[1]: 3 is not of type 'string'",
    ]
    assert schema.problems({"name": "Ada", "tags": [], "age": 3}, PERSON) == []


def test_a_value_is_shown_as_json_and_a_length_limit_is_named() -> None:
    limited = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "picks": {"type": "array", "maxItems": 3},
            "mail": {"type": "string", "format": "email"},
        },
    }
    wrong = schema.problems({"n": None, "picks": ["a", "b", "c", "d"], "mail": "not-an-email"}, limited)
    assert wrong == [
        "args.mail: \"not-an-email\" is not a valid 'email'",
        "args.n: null is not of type 'integer'",
        "args.picks: has 4 items; at most 3 allowed",
    ]


def test_no_schema_or_a_broken_one_holds_nothing_against_the_value() -> None:
    assert schema.problems({"anything": 1}, None) == []
    assert schema.problems({"anything": 1}, {}) == []
    assert schema.problems({"anything": 1}, {"type": "no-such-type"}) == []


def test_a_pattern_that_backtracks_is_given_up_within_its_budget() -> None:
    evil = {"type": "string", "pattern": "^(a|aa)+$"}
    started = time.monotonic()
    wrong = schema.problems("a" * 5000 + "b", evil)
    assert wrong == [] and time.monotonic() - started < 5 * schema.PATTERN_BUDGET_S
    assert schema.problems("b", {"type": "string", "pattern": "^(a|aa)+$"}) == [
        "args: \"b\" does not match '^(a|aa)+$'"
    ]


def test_the_same_schema_object_is_compiled_once() -> None:
    first = schema._validator(PERSON)
    assert schema._validator(PERSON) is first
    assert schema._validator(dict(PERSON)) is first  # an equal schema: the same compiled validator
