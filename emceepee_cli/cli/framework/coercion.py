"""Plain option values converted without pydantic, so a command (and a TAB press) starts fast.

typer converts every parameter's value through a pydantic TypeAdapter, built on first use, and
importing pydantic for that costs more than the rest of a command's start-up. emceepee's options
are all plain (a flag, a string, a number, a path, a list of strings): for those, `install()`
has typer convert with the type itself. Any other parameter (a choice, a range, a file, a date)
keeps typer's own conversion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import typer

from emceepee_cli.cli.framework.typer_api import (
    Context,
    Conversion,
    RuntimeParam,
    TypeDescriptor,
    runtime_param_builder,
    set_runtime_param_builder,
)

_PLAIN: dict[Any, Callable[[Any], Any]] = {str: str, int: int, float: float, Path: Path}
_WHAT = {int: "a whole number", float: "a number", bool: "a flag", Path: "a path", str: "text"}


@dataclass(frozen=True)
class PlainRuntimeParam(Conversion):
    """Conversion by the annotation's own type (each item's, for a list)."""

    convert: Callable[[Any], Any]
    many: bool
    item_type: Any = None

    def convert_value(self, value: Any, param: Any, ctx: Context) -> Any:
        try:
            if self.many:
                return [self.convert(item) for item in value]
            return self.convert(value)
        except (TypeError, ValueError):
            what = _WHAT.get(self.item_type, "a valid value")
            raise typer.BadParameter(f"{value!r} is not {what}.", ctx=ctx, param=param) from None


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError("expected a flag")


def plain(descriptor: TypeDescriptor) -> RuntimeParam | None:
    """A pydantic-free conversion for `descriptor`, or None if it needs typer's own."""
    info = descriptor.parameter_info
    constrained = (
        descriptor.file_annotation is not None
        or info.parser is not None
        or info.min is not None
        or info.max is not None
        or info.formats is not None
        or info.exists
        or info.resolve_path
        or info.writable
    )
    if constrained:
        return None
    annotation: Any = descriptor.annotation
    many = False
    if get_origin(annotation) is list and len(get_args(annotation)) == 1:
        annotation, many = get_args(annotation)[0], True
    convert = _flag if annotation is bool and not many else _PLAIN.get(annotation)
    if convert is None:
        return None
    return PlainRuntimeParam(
        parameter_info=info,
        annotation=descriptor.annotation,
        convert=convert,
        many=many,
        item_type=annotation,
    )


def install() -> None:
    original = runtime_param_builder()
    if getattr(original, "emceepee_plain", False):
        return

    def build(descriptor: TypeDescriptor) -> RuntimeParam:
        return plain(descriptor) or original(descriptor)

    build.emceepee_plain = True  # type: ignore[attr-defined]  # marks the wrapper, so it wraps once
    set_runtime_param_builder(build)
