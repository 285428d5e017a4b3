"""typer's extension points, named in one place: the only module that reaches past typer's public API.

emceepee's CLI extends what typer's public API does not cover: the lazy group (`lazy.py`), value
completion on TAB (`complete.py`), the error boundary (`main.py`), the pydantic-free conversion that
keeps start-up fast (`coercion.py`), the generated reference and completion scripts. No module of
emceepee imports a private module of typer (`typer._click`, `typer._coercion`, ...); every other
module takes these names from here. Where each comes from (typer 0.29):

- typer's public modules: `CompletionItem`, `RuntimeParam`, `TypeDescriptor` and the converter
  builder `build_runtime_param` (which emceepee wraps, in place) are typer.core's; the completion
  script is typer.completion's. typer imports them there without an `as`, so pyproject.toml tells
  mypy to see those imports, as Python does.
- click's classes `Command`, `Context`, `HelpFormatter`, `Parameter` and the usage errors: typer
  carries click privately since 0.26 and names none of them publicly. The last resort: they are
  reached as attributes of `typer.core._click`, the copy typer.core builds on. `typer.Context`,
  `typer.CallbackParam` and `typer.BadParameter` are subclasses, no stand-ins: typer passes click's
  own `Context` to the methods emceepee overrides, to completers and to converters, and raises
  click's own errors.
- two private attributes, where typer has no public way: a parameter's completer
  (`_custom_shell_complete`, what `shell_complete=` sets), and `_coerce_value`, the step of typer's
  conversion that `Conversion` implements.

pyproject.toml pins typer to the minor version this was tested with, and
tests/cli/test_framework.py fails, by name, the day one of them moves.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import typer.completion
import typer.core

CompletionItem = typer.core.CompletionItem
RuntimeParam = typer.core.RuntimeParam
TypeDescriptor = typer.core.TypeDescriptor

Command = typer.core._click.Command
Context = typer.core._click.Context
HelpFormatter = typer.core._click.HelpFormatter
Parameter = typer.core._click.Parameter
ClickException = typer.core._click.exceptions.ClickException
UsageError = typer.core._click.exceptions.UsageError
NoArgsIsHelpError = typer.core._click.exceptions.NoArgsIsHelpError

Completer = Callable[[Context, Parameter, str], list[CompletionItem]]


class BuildRuntimeParam(Protocol):
    """How typer builds a parameter's converter: `build_runtime_param(descriptor)`."""

    def __call__(self, descriptor: TypeDescriptor) -> RuntimeParam: ...


@dataclass(frozen=True)
class Conversion(RuntimeParam):
    """A parameter's converter: typer hands `convert_value` each value given, once it has dealt with
    None (and refused a lone string for a list)."""

    @abstractmethod
    def convert_value(self, value: Any, param: Any, ctx: Context) -> Any: ...

    def _coerce_value(self, value: Any, param: Any, ctx: Context) -> Any:
        return self.convert_value(value, param, ctx)


def set_completer(param: Parameter, completer: Completer) -> None:
    """What `shell_complete=` would have set had the parameter been declared with it."""
    param._custom_shell_complete = completer


def runtime_param_builder() -> BuildRuntimeParam:
    """How typer builds a parameter's converter (looked up in typer.core when a value is first converted)."""
    return typer.core.build_runtime_param


def set_runtime_param_builder(builder: BuildRuntimeParam) -> None:
    typer.core.build_runtime_param = builder


def completion_script(prog_name: str, complete_var: str, shell: str) -> str:
    """The script `--show-completion` prints for `shell` (there without choosing the shell)."""
    return typer.completion.get_completion_script(prog_name=prog_name, complete_var=complete_var, shell=shell)
