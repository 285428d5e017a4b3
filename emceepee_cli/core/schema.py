"""JSON Schema checks for anything a host or backend sends us (tool args, answers).

Validators are compiled once per schema object and cached by its canonical JSON text.
Error messages name the field path, so a model (or a person) can fix the one thing wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators


@lru_cache(maxsize=1024)
def _compiled(schema_json: str) -> jsonschema.protocols.Validator | None:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return None  # a broken schema from a backend: we cannot judge, the backend will
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


_by_identity: dict[int, tuple[Mapping[str, Any], jsonschema.protocols.Validator | None]] = {}


def _validator(schema: Mapping[str, Any]) -> jsonschema.protocols.Validator | None:
    """The compiled validator; the same schema object (a listed tool's) skips even the JSON key."""
    hit = _by_identity.get(id(schema))
    if hit is not None and hit[0] is schema:  # holding the schema keeps its id from being reused
        return hit[1]
    validator = _compiled(json.dumps(schema, sort_keys=True, default=str))
    if len(_by_identity) >= 4096:
        _by_identity.clear()
    _by_identity[id(schema)] = (schema, validator)
    return validator


def problems(instance: Any, schema: Mapping[str, Any] | None, root: str = "args") -> list[str]:
    """Each way `instance` fails `schema`, as `path: reason` lines; empty when valid."""
    if not schema:
        return []
    validator = _validator(schema)
    if validator is None:
        return []
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{_path(root, e.absolute_path)}: {e.message}" for e in errors]


def _path(root: str, parts: Any) -> str:
    out = root
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
