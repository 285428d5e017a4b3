"""What the CLI tells a person to do next names CLI commands, never the meta-tools a host's model
calls: errors raised in code serve and the CLI share carry a hint for each (errors.py). And the
small things every command shares: `-h` is `--help`, a taken name says `--replace`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from emceepee_cli.errors import NotFound, UsageError, hints, logs_step, tools_step
from emceepee_cli.questions.answers import check_approver
from tests.cli.clirun import cli, example_line
from tests.support import hostile_table, write_config

if TYPE_CHECKING:
    from emceepee_cli.store.records import PendingRow

# A meta-tool's name, or a meta-tool call: what a hint for the terminal must not say.
META_TOOLS = re.compile(
    r"\b(list_tools|list_servers|get_logs|get_task|get_task_result|execute_tool|list_tasks|resume_tool|"
    r"add_server|remove_server|respond_to_elicitation|respond_to_sampling|list_resources|list_prompts)\b"
)


@pytest.fixture
def config(tmp_path: Path) -> str:
    return str(write_config(tmp_path / "config.toml", hostile_table("h")))


def test_a_hint_made_for_both_surfaces_names_a_meta_tool_for_the_model_and_a_command_for_a_person() -> None:
    made = NotFound(
        "No tool.", **hints("List its tools with {}; its log: {}.", tools_step("h"), logs_step("h"))
    )
    assert made.hint == "List its tools with list_tools(server='h'); its log: get_logs(server='h')."
    assert (
        made.cli_hint
        == made.terminal_hint
        == "List its tools with emceepee tools h; its log: emceepee logs h."
    )
    assert NotFound("No tool.", hint="Said once.").terminal_hint == "Said once."


def test_an_unknown_tool_points_at_emceepee_tools(config: str) -> None:
    done = cli("call", "h", "nope", "--config", config, "--json")
    error = done.json()["error"]
    assert done.code == 2 and error["hint"] == "List its tools with emceepee tools h."
    plain = cli("call", "h", "nope", "--config", config)
    assert "emceepee tools h" in plain.err and not META_TOOLS.search(plain.err), plain.err


@pytest.mark.parametrize(
    ("words", "code"),
    [
        (["die", "code=3"], 3),  # the backend dies during the call
        (["rpc_error", "code=-32603", "message=broken"], 3),  # it answers with its own error
        (["malformed"], 3),  # it answers with what emceepee cannot use
        (["garbage"], None),  # a line that is not JSON-RPC, then its answer: the call still works
    ],
)
def test_a_backend_failing_a_call_points_at_its_log_as_a_command(
    config: str, words: list[str], code: int | None
) -> None:
    done = cli("call", "h", *words, "--config", config, "--json")
    if code is None:
        assert done.code == 0, done
        return
    error = done.json()["error"]
    assert done.code == code, done
    assert "emceepee logs h" in error["hint"] and not META_TOOLS.search(error["hint"]), error


@pytest.mark.parametrize(
    "words",
    [[], ["servers"], ["servers", "add"], ["tasks", "list"], ["logs"], ["events"], ["call"], ["journal"]],
)
def test_dash_h_is_help_everywhere(words: list[str]) -> None:
    short, long = cli(*words, "-h"), cli(*words, "--help")
    assert short.code == 0 and short.out.startswith("Usage: emceepee") and short.out == long.out
    assert "-h, --help" in short.out


def test_dash_h_after_dashdash_is_the_backends_own_argument() -> None:
    done = cli("servers", "add", "helped", "--json", "--", "python3", "-h")
    assert done.code == 0 and done.json()["added"]["args"] == ["-h"]


def test_a_name_taken_says_replace_and_replace_replaces_it() -> None:
    first = cli(*example_line("echo", "echo.py"))
    again = cli(*example_line("echo", "echo.py"))
    replaced = cli("servers", "add", "echo", "--replace", "--json", "--", "python3", "-V")
    assert first.code == 0 and again.code == 2
    assert "already exists" in again.err and "emceepee servers add echo --replace" in again.err
    assert replaced.code == 0 and replaced.json()["added"]["args"] == ["-V"]


@pytest.mark.parametrize("change", [None, "add_server"])
def test_an_approval_a_terminal_may_not_accept_says_how_to_decline_it_from_the_terminal(
    change: str | None,
) -> None:
    approval = {"tool": "t", "by": ["host"], **({"change": change} if change else {})}
    row = {"request_id": "01APPROVAL", "server": "s", "purpose": "approval", "approval": json.dumps(approval)}
    with pytest.raises(UsageError) as refused:
        check_approver(cast("PendingRow", row), {"action": "accept"}, "cli")
    assert (
        refused.value.terminal_hint is not None
        and "emceepee answer 01APPROVAL --decline" in refused.value.terminal_hint
    )
    assert not META_TOOLS.search(refused.value.terminal_hint)
    assert refused.value.hint is not None and "Ask the user" in refused.value.hint  # the model's, as before
