"""emceepee imports no private module of typer, and what emceepee_cli/cli/framework/typer_api.py
takes from typer still means what it expects.

typer_api.py reaches click's classes as attributes of `typer.core._click`, sets a parameter's
`_custom_shell_complete` and implements typer's `_coerce_value`. typer is pinned to one minor
version in pyproject.toml; a new typer that moves one of these fails here, by name, before it fails
as a broken command line.
"""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import version
from typing import Any

import pytest
import typer
import typer.core
from typer.testing import CliRunner

from emceepee_cli.cli.framework import typer_api
from emceepee_cli.cli.framework.coercion import PlainRuntimeParam
from emceepee_cli.cli.main import command
from tests.cli.clirun import cli
from tests.support import ROOT

MODULE_NAME = re.compile(r"typer(\.\w+)+")


def private_typer_imports(source: str) -> list[str]:
    """The private modules of typer `source` imports: by `import`, by `from`, or named in a string
    (as `importlib.import_module` takes them)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and MODULE_NAME.fullmatch(node.value)
        ):
            names.append(node.value)
    return sorted({name for name in names if _is_private(name)})


def _is_private(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "typer" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


def test_typer_is_the_minor_version_the_pin_names() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "typer>=0.29,<0.30" in declared and version("typer").startswith("0.29.")


def test_no_module_of_emceepee_imports_a_private_module_of_typer() -> None:
    modules = sorted((ROOT / "emceepee_cli").rglob("*.py"))
    found = {str(path.relative_to(ROOT)): private_typer_imports(path.read_text()) for path in modules}
    assert "emceepee_cli/cli/framework/typer_api.py" in found
    assert {path: names for path, names in found.items() if names} == {}


@pytest.mark.parametrize(
    "source",
    [
        "import typer._click",
        "from typer._click.exceptions import UsageError",
        "from typer import _coercion",
        "from typer.core import _click",
        "importlib.import_module('typer._completion_shared')",
    ],
)
def test_the_import_scan_sees_each_way_of_importing_a_private_module(source: str) -> None:
    assert private_typer_imports(source)


def test_the_import_scan_lets_public_modules_and_their_attributes_pass() -> None:
    source = "import typer.core\nfrom typer.core import TyperGroup\nContext = typer.core._click.Context\n"
    assert private_typer_imports(source + "v = typer.__version__\n") == []


def test_clicks_classes_reached_through_typer_core_are_the_ones_typers_public_classes_build_on() -> None:
    assert issubclass(typer.Context, typer_api.Context)
    assert issubclass(typer.CallbackParam, typer_api.Parameter)
    assert issubclass(typer.core.TyperOption, typer_api.Parameter)
    assert issubclass(typer.core.TyperArgument, typer_api.Parameter)
    assert issubclass(typer.core.TyperCommand, typer_api.Command)
    assert issubclass(typer.core.TyperGroup, typer_api.Command)
    assert isinstance(typer.Context(command()).make_formatter(), typer_api.HelpFormatter)
    assert issubclass(typer.BadParameter, typer_api.UsageError)
    assert issubclass(typer_api.UsageError, typer_api.ClickException)
    assert issubclass(typer_api.NoArgsIsHelpError, typer_api.UsageError)


def test_a_command_line_without_arguments_raises_the_error_the_boundary_turns_into_help() -> None:
    with pytest.raises(typer_api.NoArgsIsHelpError):
        command().main(args=[], prog_name="emceepee", standalone_mode=False)
    shown = cli()
    assert shown.code == 0 and shown.out.startswith("Usage: emceepee [OPTIONS] COMMAND")


def test_typers_resolution_without_suggestions_is_clicks_own() -> None:
    group = typer.core.TyperGroup(
        name="g", commands=[typer.core.TyperCommand("paths")], suggest_commands=False
    )
    ctx = typer.Context(group, info_name="g")
    name, found, rest = group.resolve_command(ctx, ["paths", "--json"])
    assert name == "paths" and found is group.commands["paths"] and rest == ["--json"]
    with pytest.raises(typer_api.UsageError) as raised:
        group.resolve_command(ctx, ["path"])
    assert raised.value.message == "No such command 'path'."


def test_a_mistyped_command_is_suggested_from_every_command_loaded_or_not() -> None:
    mistyped = cli("task")
    assert mistyped.code == 2 and mistyped.err.count("Did you mean") == 1
    assert mistyped.err.startswith("Error: No such command 'task'. Did you mean 'tasks'?")
    assert "No such command 'lst'. Did you mean 'list'?" in cli("servers", "lst").err  # typer's own


def test_a_completer_set_on_a_parameter_is_the_one_a_tab_press_asks() -> None:
    root = command()
    ctx = typer.Context(root, info_name="emceepee")
    param = next(p for p in root.params if p.name == "verbose")
    typer_api.set_completer(param, lambda c, p, incomplete: [typer_api.CompletionItem(incomplete + "!")])
    assert [item.value for item in param.shell_complete(ctx, "a")] == ["a!"]


def test_typers_completion_offers_the_completion_items_named_here() -> None:
    root = command()
    offered = root.shell_complete(typer.Context(root, info_name="emceepee"), "pa")
    assert [item.value for item in offered] == ["paths"]
    assert all(isinstance(item, typer_api.CompletionItem) for item in offered)


def test_the_converter_builder_emceepee_wraps_is_the_one_typer_calls() -> None:
    builder = typer_api.runtime_param_builder()
    assert getattr(builder, "emceepee_plain", False), "coercion.install() wrapped typer's builder"
    assert cli("paths", "--json").code == 0


def test_typer_converts_a_plain_value_through_emceepees_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    convert_value = PlainRuntimeParam.convert_value

    def watched(self: PlainRuntimeParam, value: Any, param: Any, ctx: typer_api.Context) -> Any:
        seen.append(value)
        return convert_value(self, value, param, ctx)

    monkeypatch.setattr(PlainRuntimeParam, "convert_value", watched)
    app = typer.Typer()

    @app.command()
    def count(n: int = 0) -> None:
        typer.echo(repr(n))

    assert CliRunner().invoke(app, ["--n", "3"]).output == "3\n" and "3" in seen


def test_the_completion_script_is_typers() -> None:
    script = typer_api.completion_script("emceepee", "_EMCEEPEE_COMPLETE", "bash")
    assert "_EMCEEPEE_COMPLETE=complete_bash" in script
