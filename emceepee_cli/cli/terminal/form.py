"""Asking for a form at the terminal, field by field, from a question's `requested_schema`.

Each field is asked with a hint of what it takes (a choice by number or value, y/n, a number, a
comma-separated list), its default or whether Enter skips it; a value is checked against the
field's own schema before the next field is asked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from emceepee_cli.cli.terminal import render

SKIP = object()


@dataclass
class Field:
    """One property of a form's `requested_schema`, as the terminal asks for it."""

    name: str
    prop: dict[str, Any]
    required: bool
    kind: str = field(init=False)
    choices: list[tuple[Any, str]] | None = field(init=False)

    def __post_init__(self) -> None:
        kind = self.prop.get("type", "string")
        self.kind = kind if isinstance(kind, str) else next((k for k in kind if k != "null"), "string")
        self.choices = choices(self.prop.get("items") or {} if self.kind == "array" else self.prop)

    def hint(self) -> str:
        if self.choices:
            base = f"1-{len(self.choices)}" + (", several comma-separated" if self.kind == "array" else "")
        else:
            base = {
                "boolean": "y/n",
                "integer": "a whole number",
                "number": "a number",
                "array": "values, comma-separated",
            }.get(self.kind, "text")
        if "default" in self.prop:
            return f"{base}, Enter = {self.shown(self.prop['default'])}"
        return base if self.required else f"{base}, Enter skips"

    def shown(self, value: Any) -> str:
        if isinstance(value, list):
            return ", ".join(self.shown(v) for v in value)
        if isinstance(value, bool):
            return "yes" if value else "no"
        return next((title for v, title in self.choices or [] if v == value), str(value))

    def parse(self, text: str) -> Any:
        if self.kind == "array":
            parts = [p.strip() for p in text.split(",") if p.strip()]
            return [pick(p, self.choices) if self.choices else p for p in parts]
        if self.choices:
            return pick(text, self.choices)
        if self.kind == "boolean":
            if text.lower() in ("y", "yes", "true"):
                return True
            if text.lower() in ("n", "no", "false"):
                return False
            raise ValueError("Answer y or n.")
        if self.kind in ("integer", "number"):
            return parse_number(text, whole=self.kind == "integer")
        return text


def choices(prop: dict[str, Any]) -> list[tuple[Any, str]] | None:
    """(value, title) pairs of an enum: `enum` (+ legacy `enumNames`) or `oneOf`/`anyOf` of `const`s."""
    if "enum" in prop:
        names = prop.get("enumNames") or []
        return [(v, str(names[i]) if i < len(names) else str(v)) for i, v in enumerate(prop["enum"])]
    options = prop.get("oneOf") or prop.get("anyOf")
    if options and all(isinstance(o, dict) and "const" in o for o in options):
        return [(o["const"], str(o.get("title") or o["const"])) for o in options]
    return None


def pick(text: str, options: list[tuple[Any, str]]) -> Any:
    # A typed value (or title) wins over a number, so enum ["2", "1"] still means what is typed.
    for value, title in options:
        if text == str(value) or text.casefold() == title.casefold():
            return value
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1][0]
    raise ValueError(f"Choose 1-{len(options)} (or type a value).")


def parse_number(text: str, whole: bool) -> int | float:
    try:
        return int(text)
    except ValueError:
        if whole:
            raise ValueError(f"'{text}' is not a whole number.") from None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a number.") from None
    if not math.isfinite(value):
        raise ValueError(f"'{text}' is not a finite number.")
    return value


def ask_form(requested: dict[str, Any]) -> dict[str, Any]:
    required = set(requested.get("required") or [])
    content: dict[str, Any] = {}
    for name, prop in (requested.get("properties") or {}).items():
        value = ask_field(Field(name, prop, name in required))
        if value is not SKIP:
            content[name] = value
    return content


def ask_field(f: Field) -> Any:
    render.line()
    render.line(f"{f.prop.get('title') or f.name}{' (required)' if f.required else ''}")
    if f.prop.get("description"):
        render.line(f"  {f.prop['description']}")
    for i, (value, title) in enumerate(f.choices or [], 1):
        render.line(f"  {i}) {title}" + ("" if title == str(value) else f" ({value})"))
    while True:
        text = render.ask(f"  [{f.hint()}] > ").strip()
        if not text:
            if "default" in f.prop or not f.required:
                return f.prop.get("default", SKIP)
            render.warn("  This field is required.")
            continue
        try:
            value = f.parse(text)
        except ValueError as exc:
            render.warn(f"  {exc}")
            continue
        from emceepee_cli import schema  # jsonschema and regex: only once a form is asked

        if not (wrong := schema.problems(value, f.prop, root=f.name)):
            return value
        render.warn("  " + "; ".join(wrong))


# ---- a form described, for an answer given without a terminal ----------------------------------

JSON_KINDS = {
    "boolean": "true or false",
    "integer": "a whole number",
    "number": "a number",
    "array": "a list",
}
EXAMPLES = {"boolean": True, "integer": 1, "number": 1.5, "array": []}


def described(requested: dict[str, Any]) -> list[str]:
    """Each field of a form on one line: its name, what it takes as JSON, required or not, its title."""
    required = set(requested.get("required") or [])
    out = []
    for name, prop in (requested.get("properties") or {}).items():
        f = Field(name, prop, name in required)
        takes = JSON_KINDS.get(f.kind, "text")
        if f.choices:
            listed = ", ".join(_json(value) for value, _ in f.choices)
            takes = f"{'some of' if f.kind == 'array' else 'one of'} {listed}"
        about = [takes, "required" if f.required else "optional"]
        if "default" in prop:
            about.append(f"default {_json(prop['default'])}")
        title = prop.get("title") or prop.get("description")
        out.append(f"{name}: {'; '.join(about)}" + (f" ({title})" if title and title != name else ""))
    return out


def example(requested: dict[str, Any]) -> str:
    """A content object for `--content` with the form's required fields (all of them if none are)."""
    props: dict[str, Any] = requested.get("properties") or {}
    names = [n for n in requested.get("required") or [] if n in props] or list(props)
    content = {}
    for name in names:
        f = Field(name, props[name], True)
        content[name] = f.choices[0][0] if f.choices and f.kind != "array" else EXAMPLES.get(f.kind, "…")
    return _json(content)


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
