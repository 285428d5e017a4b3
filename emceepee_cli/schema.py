"""JSON Schema checks for anything a host or backend sends us (tool args, answers).

Validators are compiled once per schema object and cached by its canonical JSON text.
Error messages name the field path, so a model (or a person) can fix the one thing wrong.

A schema comes from a backend and the instance from the host, so neither is trusted: the
`pattern` keyword is matched with the `regex` package within a time budget per check (Python's
`re` cannot be interrupted, and `(a|aa)+$` on a long string backtracks for minutes). A pattern
that cannot be judged in time is not held against the instance: the backend judges it.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import regex

from emceepee_cli.quickschema import Check, compile_quick

log = logging.getLogger(__name__)

PATTERN_BUDGET_S = 0.5  # for all `pattern` checks of one `problems()` call
PATTERN_MATCH_S = 0.1  # for one of them: a sane pattern matches in microseconds
_deadline: contextvars.ContextVar[float] = contextvars.ContextVar("schema_deadline", default=0.0)


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[jsonschema.exceptions.ValidationError]:
    """The `pattern` keyword, bounded: a pattern that cannot be compiled or matched in time passes."""
    if not validator.is_type(instance, "string"):
        return
    try:
        found = _search(pattern, instance, _deadline.get() - time.monotonic())
    except (TimeoutError, regex.error, OverflowError, MemoryError, RecursionError) as exc:
        log.warning(
            "schema pattern %r not checked (%s); the backend will judge it", pattern[:80], type(exc).__name__
        )
        return
    if found is None:
        yield jsonschema.exceptions.ValidationError(f"{instance!r} does not match {pattern!r}")


def _search(pattern: str, instance: str, left_s: float) -> regex.Match[str] | None:
    if left_s <= 0:
        raise TimeoutError
    return _compiled_pattern(pattern).search(instance, timeout=min(left_s, PATTERN_MATCH_S))


@lru_cache(maxsize=256)
def _compiled_pattern(pattern: str) -> regex.Pattern[str]:
    if len(pattern) > 1000:
        raise regex.error("pattern too long to check")
    return regex.compile(pattern, regex.VERSION0)


Keyword = Callable[[Any, Any, Any, Mapping[str, Any]], Iterator[jsonschema.exceptions.ValidationError]]
# jsonschema's stubs leave `extend` untyped: this is the one way it is called here.
_extend = cast(
    Callable[
        [type[jsonschema.protocols.Validator], dict[str, Keyword]], type[jsonschema.protocols.Validator]
    ],
    jsonschema.validators.extend,
)


_Compiled = tuple[jsonschema.protocols.Validator, Check | None]  # and its quick check, if it has one


@lru_cache(maxsize=1024)
def _compiled(schema_json: str) -> _Compiled | None:
    schema = json.loads(schema_json)
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls = _extend(base, {"pattern": _pattern})
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return None  # a broken schema from a backend: we cannot judge, the backend will
    return cls(schema, format_checker=FORMATS), compile_quick(schema)


# jsonschema checks `uri` and `date-time` only with optional packages; a form's `format: uri` or
# `date-time` (MCP elicitation allows both) is checked here instead, to the letter of RFC 3986 / 3339.
FORMATS = jsonschema.FormatChecker()
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"{}|\\^`\x00-\x1f\x7f]*")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


@FORMATS.checks("uri")
def _is_uri(value: object) -> bool:
    return not isinstance(value, str) or _URI.fullmatch(value) is not None


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if _DATE_TIME.fullmatch(value) is None:
        return False
    datetime.fromisoformat(value.upper().replace("Z", "+00:00"))  # a 13th month raises
    return True


_by_identity: dict[int, tuple[Mapping[str, Any], _Compiled | None]] = {}


def _validator(schema: Mapping[str, Any]) -> _Compiled | None:
    """The compiled validator and quick check; the same schema object (a listed tool's) skips even
    the JSON key."""
    hit = _by_identity.get(id(schema))
    if hit is not None and hit[0] is schema:  # holding the schema keeps its id from being reused
        return hit[1]
    compiled = _compiled(json.dumps(schema, sort_keys=True, default=str))
    if len(_by_identity) >= 4096:
        _by_identity.clear()
    _by_identity[id(schema)] = (schema, compiled)
    return compiled


def problems(instance: Any, schema: Mapping[str, Any] | None, root: str = "args") -> list[str]:
    """Each way `instance` fails `schema`, as `path: reason` lines; empty when valid."""
    if not schema:
        return []
    compiled = _validator(schema)
    if compiled is None:
        return []
    validator, quick = compiled
    if quick is not None and quick(instance):  # surely valid (quickschema.py): most calls
        return []
    token = _deadline.set(time.monotonic() + PATTERN_BUDGET_S)
    try:
        errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    finally:
        _deadline.reset(token)
    return [f"{_path(root, e.absolute_path)}: {_message(e)}" for e in errors]


def _message(error: jsonschema.exceptions.ValidationError) -> str:
    """jsonschema's message, with the value shown as JSON (null, true, ["a"]) rather than as Python,
    and the format or the length limit named."""
    if error.validator == "format":
        value = json.dumps(error.instance, ensure_ascii=False, default=repr)
        return f"{value} is not a valid '{error.validator_value}'"
    limits = {"maxItems": "at most", "minItems": "at least", "maxLength": "at most", "minLength": "at least"}
    if error.validator in limits and isinstance(error.instance, list | str):
        unit = "items" if isinstance(error.instance, list) else "characters"
        bound = f"{limits[str(error.validator)]} {error.validator_value}"
        return f"has {len(error.instance)} {unit}; {bound} allowed"
    message = str(error.message)
    shown = repr(error.instance)
    if message.startswith(shown):
        message = json.dumps(error.instance, ensure_ascii=False, default=repr) + message[len(shown) :]
    return message.replace(" is not a '", " is not a valid '")


def _path(root: str, parts: Any) -> str:
    out = root
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
