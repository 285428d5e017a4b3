"""The names emceepee_cli/cli/framework.py takes from typer's internals still mean what it expects.

typer is pinned to one minor version in pyproject.toml; a new typer that moves one of these fails
here, by name, before it fails as a broken command line.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import version

import typer
import typer.core

from emceepee_cli.cli import framework
from emceepee_cli.cli.main import command, main
from tests.support import ROOT


def test_typer_is_the_minor_version_the_pin_names() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert "typer>=0.29,<0.30" in declared and version("typer").startswith("0.29.")


def test_typers_groups_commands_and_contexts_are_the_click_classes_named_here() -> None:
    root = command()
    assert isinstance(root, typer.core.TyperGroup) and isinstance(root, framework.Command)
    assert issubclass(typer.Context, framework.Context)
    assert issubclass(typer.BadParameter, framework.UsageError)
    assert issubclass(framework.UsageError, framework.ClickException)
    assert issubclass(framework.NoArgsIsHelpError, framework.UsageError)


def test_resolving_a_command_is_clicks_own_without_typers_suggestion() -> None:
    root = command()
    assert isinstance(root, typer.core.TyperGroup)
    ctx = typer.Context(root, info_name="emceepee")
    name, found, rest = framework.resolve_command(root, ctx, ["paths", "--json"])
    assert name == "paths" and found is not None and rest == ["--json"]


def test_a_completer_set_on_a_parameter_is_the_one_a_tab_press_asks() -> None:
    root = command()
    ctx = typer.Context(root, info_name="emceepee")
    param = next(p for p in root.params if p.name == "verbose")
    framework.set_completer(param, lambda c, p, incomplete: [framework.CompletionItem(incomplete + "!")])
    assert [item.value for item in param.shell_complete(ctx, "a")] == ["a!"]


def test_the_converter_builder_emceepee_wraps_is_the_one_typer_calls() -> None:
    builder = framework.runtime_param_builder()
    assert getattr(builder, "emceepee_plain", False), "coercion.install() wrapped typer's builder"
    assert main(["paths", "--json"]) == 0


def test_the_completion_script_is_typers() -> None:
    script = framework.completion_script("emceepee", "_EMCEEPEE_COMPLETE", "bash")
    assert "_EMCEEPEE_COMPLETE=complete_bash" in script
