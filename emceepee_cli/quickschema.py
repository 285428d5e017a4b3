"""A quick "surely valid" for the schemas tools usually have, so a valid call skips jsonschema.

Every call is checked twice (execute_tool's own arguments, then the backend tool's), and nearly
every call is valid. `compile_quick` turns a schema made only of the common keywords (`type`,
`properties`, `required`, `additionalProperties`, `items`, `enum`, `const`, numeric and length
bounds, and annotations such as `description`) into a plain function that says True only when
the instance is certainly valid. Anything else — another keyword, a `$ref`, a `format`, a draft
before 7, a value whose JSON type is in doubt (`1.0` for an integer, `true` against `1`) — gets
no quick answer or a False, and jsonschema (schema.py) decides and words the errors. So the
quick check can only ever skip work, never change a verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], bool]

ANNOTATIONS = frozenset(
    ("title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly")
)
DRAFTS = frozenset(
    (
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    )
)
# What is certainly each JSON type, as parsed from JSON (bool is not an integer; 1.0 is in doubt).
_TYPES: dict[str, Check] = {
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or (type(v) is float and math.isfinite(v)),
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}


def compile_quick(schema: Any) -> Check | None:
    """A function saying True only for instances `schema` certainly accepts; None if the schema
    has anything this module does not know (then every instance goes to jsonschema)."""
    if isinstance(schema, Mapping) and "$schema" in schema:
        if schema["$schema"] not in DRAFTS:
            return None
        schema = {k: v for k, v in schema.items() if k != "$schema"}
    try:
        return _compile(schema, depth=0)
    except _Unknown:
        return None


class _Unknown(Exception):
    """A keyword or value the quick check does not judge."""


def _compile(schema: Any, depth: int) -> Check:
    if schema is True:
        return _yes
    if not isinstance(schema, Mapping) or depth > 16:
        raise _Unknown
    checks: list[Check] = []
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        build = _KEYWORDS.get(key)
        if build is None:
            raise _Unknown
        checks.append(build(value, schema, depth))
    if not checks:
        return _yes
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(check(v) for check in checks)


def _yes(value: Any) -> bool:
    return True


def _type(value: Any, schema: Mapping[str, Any], depth: int) -> Check:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not names or not all(n in _TYPES for n in names):
        raise _Unknown
    tests = [_TYPES[n] for n in names]
    if len(tests) == 1:
        return tests[0]
    return lambda v: any(test(v) for test in tests)


def _properties(value: Any, schema: Mapping[str, Any], depth: int) -> Check:
    if not isinstance(value, Mapping):
        raise _Unknown
    subs = {name: _compile(sub, depth + 1) for name, sub in value.items()}
    return lambda v: type(v) is not dict or all(sub(v[name]) for name, sub in subs.items() if name in v)


def _required(value: Any, schema: Mapping[str, Any], depth: int) -> Check:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise _Unknown
    names = tuple(value)
    return lambda v: type(v) is not dict or all(n in v for n in names)


def _additional(value: Any, schema: Mapping[str, Any], depth: int) -> Check:
    known = schema.get("properties", {})
    if not isinstance(known, Mapping):
        raise _Unknown
    if value is False:
        return lambda v: type(v) is not dict or all(k in known for k in v)
    sub = _compile(value, depth + 1)
    return lambda v: type(v) is not dict or all(sub(item) for k, item in v.items() if k not in known)


def _items(value: Any, schema: Mapping[str, Any], depth: int) -> Check:
    sub = _compile(value, depth + 1)  # a list of schemas (tuple items) is not judged here
    return lambda v: type(v) is not list or all(sub(item) for item in v)


def _enum(value: Any, schema: Mapping[str, Any], depth: int) -> Check:
    if not isinstance(value, list) or not all(type(x) in (str, int, bool, type(None)) for x in value):
        raise _Unknown
    allowed = frozenset((type(x), x) for x in value)  # true and 1 are different JSON values
    return lambda v: type(v) in (str, int, bool, type(None)) and (type(v), v) in allowed


def _const(value: Any, schema: Mapping[str, Any], depth: int) -> Check:
    return _enum([value], schema, depth)


def _bound(keyword: str) -> Callable[[Any, Mapping[str, Any], int], Check]:
    def build(value: Any, schema: Mapping[str, Any], depth: int) -> Check:
        if type(value) not in (int, float) or not math.isfinite(value):
            raise _Unknown
        inside: Callable[[Any], bool] = {
            "minimum": lambda v: v >= value,
            "maximum": lambda v: v <= value,
            "exclusiveMinimum": lambda v: v > value,
            "exclusiveMaximum": lambda v: v < value,
        }[keyword]
        return lambda v: type(v) not in (int, float) or (_TYPES["number"](v) and inside(v))

    return build


def _length(keyword: str) -> Callable[[Any, Mapping[str, Any], int], Check]:
    def build(value: Any, schema: Mapping[str, Any], depth: int) -> Check:
        if type(value) is not int or value < 0:
            raise _Unknown
        kind = str if keyword.endswith("Length") else list
        if keyword.startswith("min"):
            return lambda v: type(v) is not kind or len(v) >= value
        return lambda v: type(v) is not kind or len(v) <= value

    return build


_KEYWORDS: dict[str, Callable[[Any, Mapping[str, Any], int], Check]] = {
    "type": _type,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
    "items": _items,
    "enum": _enum,
    "const": _const,
    **{k: _bound(k) for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")},
    **{k: _length(k) for k in ("minLength", "maxLength", "minItems", "maxItems")},
}
