"""The quick check may only skip jsonschema, never change its verdict: wherever it says "surely
valid", jsonschema must agree — over hand-picked traps and thousands of generated cases."""

from __future__ import annotations

import random
from typing import Any

import jsonschema
import pytest

from emceepee_cli import schema
from emceepee_cli.quickschema import compile_quick
from emceepee_cli.server.meta_tools import TOOLS


def valid(instance: Any, s: Any) -> bool:
    return not list(jsonschema.Draft202012Validator(s).iter_errors(instance))


def test_the_usual_call_is_judged_quickly() -> None:
    execute = TOOLS["execute_tool"].input_schema
    quick = compile_quick(execute)
    assert quick is not None
    assert quick({"server": "a", "tool": "b", "args": {"x": 1}, "timeout_ms": 5})
    assert not quick({"server": "a", "tool": "b", "timeout_ms": -1})  # jsonschema words it
    assert not quick({"server": "a"})
    assert not quick({"server": "a", "tool": "b", "extra": 1})
    zod = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"message": {"type": "string", "description": "What to echo"}},
        "required": ["message"],
        "additionalProperties": False,
    }
    check = compile_quick(zod)
    assert check is not None and check({"message": "hi"}) and not check({})


@pytest.mark.parametrize(
    ("s", "instance"),
    [
        ({"type": "integer"}, True),  # a bool is no integer in JSON
        ({"enum": [1]}, True),
        ({"enum": [True]}, 1),
        ({"const": 0}, False),
        ({"minimum": 1}, 0),
        ({"minimum": 1}, -(10**400)),
        ({"maximum": 1.5}, 2),
        ({"exclusiveMinimum": 0}, 0),
        ({"maxLength": 2}, "abc"),
        ({"minItems": 1}, []),
        ({"type": "object", "additionalProperties": {"type": "string"}}, {"a": 1}),
        ({"type": "array", "items": {"type": "string"}}, ["a", 1]),
    ],
)
def test_traps_are_never_called_valid(s: dict[str, Any], instance: Any) -> None:
    quick = compile_quick(s)
    assert quick is not None
    assert not quick(instance)
    assert not valid(instance, s)


@pytest.mark.parametrize(
    ("s", "instance"),
    [({"type": "integer"}, 1.0), ({"type": "number"}, float("nan")), ({"maximum": 1}, 1e999)],
)
def test_values_in_doubt_go_to_jsonschema(s: dict[str, Any], instance: Any) -> None:
    quick = compile_quick(s)
    assert quick is not None and not quick(instance)  # jsonschema takes 1.0 as an integer


@pytest.mark.parametrize(
    "s",
    [
        {"type": "string", "format": "uri"},
        {"type": "string", "pattern": "^a"},
        {"$ref": "#/$defs/x", "$defs": {"x": {}}},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},
        {"anyOf": [{"type": "string"}]},
        {"type": "object", "properties": {"a": {"x-unknown": 1}}},
        {"type": "strnig"},
        {"required": "a"},
        {"items": [{"type": "string"}]},
        {"enum": [1.5]},
        {"minimum": "1"},
        {"exclusiveMinimum": True},
        [],
    ],
)
def test_what_it_does_not_know_goes_to_jsonschema(s: Any) -> None:
    assert compile_quick(s) is None


# ---- generated: random schemas of the known keywords, random JSON values


def gen_schema(rng: random.Random, depth: int = 0) -> Any:
    if depth > 2 or rng.random() < 0.15:
        return rng.choice(
            [True, {}, {"type": rng.choice(["string", "integer", "number", "boolean", "null"])}]
        )
    kind = rng.choice(["object", "array", "string", "integer", "number", "mixed", "enum"])
    s: dict[str, Any] = {"description": "d"} if rng.random() < 0.3 else {}
    if kind == "object":
        s["type"] = "object"
        names = rng.sample(["a", "b", "c", "d"], rng.randint(0, 4))
        s["properties"] = {n: gen_schema(rng, depth + 1) for n in names}
        if names and rng.random() < 0.5:
            s["required"] = rng.sample(names, rng.randint(1, len(names)))
        if rng.random() < 0.4:
            s["additionalProperties"] = rng.choice([False, True, gen_schema(rng, depth + 1)])
    elif kind == "array":
        s["type"] = "array"
        s["items"] = gen_schema(rng, depth + 1)
        s[rng.choice(["minItems", "maxItems"])] = rng.randint(0, 3)
    elif kind == "string":
        s["type"] = "string"
        s[rng.choice(["minLength", "maxLength"])] = rng.randint(0, 4)
    elif kind in ("integer", "number"):
        s["type"] = kind
        bound = rng.choice(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"])
        s[bound] = rng.choice([0, 1, -1, 2.5])
    elif kind == "mixed":
        s["type"] = rng.sample(["string", "integer", "number", "boolean", "null", "object", "array"], 2)
        s["minimum"] = 0
    else:
        s["enum"] = rng.sample(["a", "b", 0, 1, True, False, None], 3)
    return s


def gen_value(rng: random.Random, depth: int = 0) -> Any:
    choices = ["str", "int", "float", "bool", "null", "big"] + (["obj", "list"] if depth < 3 else [])
    kind = rng.choice(choices)
    if kind == "str":
        return rng.choice(["", "a", "abc", "abcdef", "é"])
    if kind == "int":
        return rng.choice([0, 1, -1, 2, 3, 100])
    if kind == "float":
        return rng.choice([0.0, 1.0, 2.5, -0.5, 1e300])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "null":
        return None
    if kind == "big":
        return 10**30
    if kind == "obj":
        return {k: gen_value(rng, depth + 1) for k in rng.sample(["a", "b", "c", "e"], rng.randint(0, 4))}
    return [gen_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def test_generated_cases_agree_with_jsonschema() -> None:
    rng = random.Random(20261123)
    said_valid = 0
    for _ in range(1500):
        s = gen_schema(rng)
        quick = compile_quick(s)
        assert quick is not None, s
        for _ in range(6):
            value = gen_value(rng)
            if quick(value):
                said_valid += 1
                assert valid(value, s), (s, value)
    assert said_valid > 1000  # it does answer quickly, not only "ask jsonschema"


def test_problems_still_words_every_error() -> None:
    execute = TOOLS["execute_tool"].input_schema
    assert schema.problems({"server": "a", "tool": "b"}, execute) == []
    assert schema.problems({"server": 1, "tool": "b"}, execute, root="arguments") == [
        "arguments.server: 1 is not of type 'string'"
    ]
