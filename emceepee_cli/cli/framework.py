"""typer's click layer, named in one place: the only module that reaches into typer's internals.

typer carries its own copy of click (`typer._click`, since 0.25) and converts option values
through pydantic (`typer._coercion`, since 0.29); neither has a public name for what emceepee's
CLI extends: the lazy group (`lazy.py`), value completion on TAB (`complete.py`), the error
boundary (`main.py`), the pydantic-free conversion that keeps start-up fast (`coercion.py`), the
generated reference and completion scripts. Every other module imports those names from here.
pyproject.toml pins typer to the minor version this was tested with, and
tests/cli/test_framework.py fails the day one of them moves.
"""

from __future__ import annotations

from collections.abc import Callable

import typer.core
from typer._click import Command as Command
from typer._click import Context as Context
from typer._click import HelpFormatter as HelpFormatter
from typer._click import Parameter as Parameter
from typer._click.exceptions import ClickException as ClickException
from typer._click.exceptions import NoArgsIsHelpError as NoArgsIsHelpError
from typer._click.exceptions import UsageError as UsageError
from typer._click.shell_completion import CompletionItem as CompletionItem
from typer._coercion import RuntimeParam as RuntimeParam
from typer._coercion import TypeDescriptor as TypeDescriptor

Completer = Callable[[Context, Parameter, str], list[CompletionItem]]
BuildRuntimeParam = Callable[[TypeDescriptor], RuntimeParam]


def set_completer(param: Parameter, completer: Completer) -> None:
    """What `shell_complete=` would have set had the parameter been declared with it."""
    param._custom_shell_complete = completer


def resolve_command(
    group: typer.core.TyperGroup, ctx: Context, args: list[str]
) -> tuple[str | None, Command | None, list[str]]:
    """click's own resolution, without typer's "did you mean" (which sees only loaded commands)."""
    return group._click_resolve_command(ctx, args)


def runtime_param_builder() -> BuildRuntimeParam:
    """How typer builds a parameter's converter (looked up in typer.core when a value is first converted)."""
    builder: BuildRuntimeParam = vars(typer.core)["build_runtime_param"]
    return builder


def set_runtime_param_builder(builder: BuildRuntimeParam) -> None:
    vars(typer.core)["build_runtime_param"] = builder


def completion_script(prog_name: str, complete_var: str, shell: str) -> str:
    """The script `--show-completion` prints for `shell` (there without choosing the shell)."""
    from typer._completion_shared import get_completion_script

    return get_completion_script(prog_name=prog_name, complete_var=complete_var, shell=shell)
