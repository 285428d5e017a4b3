"""The `emceepee` command as a whole: its one error boundary, --json errors, -v, start-up imports."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emceepee_cli.cli.main import COMMANDS, main, wants_json
from emceepee_cli.clock import now_iso
from emceepee_cli.config import load_config
from emceepee_cli.errors import NotFound
from emceepee_cli.store.journal import Journal
from tests.cli.clirun import cli
from tests.support import Terminal, as_pending_row, as_task_row, run_cli, write_config

HEAVY = ("mcp", "mcp_types", "anyio", "jsonschema", "sqlite_utils", "regex", "rich", "pydantic")

# What serve is made of (all that was once `core/`): a CLI command loads it only when it runs.
SERVE_PARTS = tuple(
    f"emceepee_cli.{part}"
    for part in (
        "backends",
        "calls",
        "questions",
        "hosts",
        "session",
        "events",
        "runtime",
        "schema",
        "quickschema",
        "patterns",
        "processes",
    )
)


def test_an_error_is_the_message_and_the_hint_never_a_traceback() -> None:
    done = cli("servers", "remove", "nope")
    assert done.code == 2
    assert done.err.startswith("Error: Unknown server 'nope'") and "servers list" in done.err
    assert "Traceback" not in done.err and done.out == ""


def test_with_json_an_error_is_one_json_document_on_stdout_with_the_exit_code() -> None:
    done = cli("servers", "remove", "nope", "--json")
    assert done.code == 2
    assert done.json() == {
        "error": {
            "type": "NotFound",
            "message": "Unknown server 'nope'. Known: (none).",
            "hint": "See them with: emceepee servers list",
        },
        "exit_code": 2,
    }


def test_with_json_a_command_line_that_does_not_parse_is_a_json_error_too() -> None:
    done = cli("servers", "list", "--bogus", "--json")
    assert done.code == 2
    error = done.json()["error"]
    assert error["type"] == "UsageError" and "--bogus" in error["message"]
    assert error["hint"] == "See: emceepee servers list --help"


def test_a_mistyped_command_is_named_with_the_closest_one() -> None:
    done = cli("taks", "list")
    assert done.code == 2 and "No such command 'taks'" in done.err and "'tasks'" in done.err


def test_json_is_the_commands_own_flag_not_after_the_double_dash() -> None:
    assert wants_json(["servers", "list", "--json"])
    assert wants_json(["answer", "01J", "--decline", "--json"])
    assert not wants_json(["servers", "add", "x", "--", "cmd", "--json"])


def test_a_v_after_the_double_dash_is_the_backends_flag_not_a_traceback(emceepee_home: Path) -> None:
    added = run_cli("servers", "add", "git", "--", "uvx", "mcp-server-git", "-v")
    refused = run_cli("servers", "add", "bad name", "--", "uvx", "-v")
    assert added.returncode == 0, added.stderr
    assert load_config(emceepee_home / "config.toml").servers["git"].args == ("mcp-server-git", "-v")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr


def test_verbose_before_the_command_shows_the_traceback() -> None:
    with pytest.raises(NotFound):
        main(["-v", "servers", "remove", "nope"])
    done = run_cli("-v", "servers", "remove", "nope")
    assert done.returncode == 1 and "Traceback" in done.stderr and "NotFound" in done.stderr


def test_help_lists_every_command_without_importing_any(tmp_path: Path) -> None:
    probe = (
        "import sys\nfrom emceepee_cli.cli.main import main\nmain(['--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('emceepee_cli.cli.') or m.split('.')[0] in "
        f"{HEAVY!r}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    *shown, loaded = done.stdout.strip().splitlines()
    assert all(f"  {name}" in "\n".join(shown) for name in COMMANDS)
    assert ast.literal_eval(loaded) == [
        "emceepee_cli.cli.framework",
        "emceepee_cli.cli.framework.coercion",
        "emceepee_cli.cli.framework.lazy",
        "emceepee_cli.cli.framework.typer_api",
        "emceepee_cli.cli.main",
        "emceepee_cli.cli.terminal",
        "emceepee_cli.cli.terminal.layout",
        "emceepee_cli.cli.terminal.render",
    ]


def test_tasks_list_reads_a_current_journal_without_the_sqlite_layer_or_the_sdk(emceepee_home: Path) -> None:
    Journal().close()  # a journal this emceepee wrote, nothing for a dead serve to settle
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "emceepee_cli", "tasks", "list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert done.returncode == 0 and "No tasks." in done.stdout
    assert not {m for m in imported if m.split(".")[0] in HEAVY}


def test_completing_a_command_name_imports_no_command_and_not_pydantic() -> None:
    env = {
        **os.environ,
        "_EMCEEPEE_COMPLETE": "complete_bash",
        "COMP_WORDS": "emceepee ta",
        "COMP_CWORD": "1",
    }
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "emceepee_cli"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.stdout.split() == ["tasks"]
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert not {m for m in imported if m.split(".")[0] in HEAVY}
    assert not {m for m in imported if m.startswith(("emceepee_cli.cli.tasks", *SERVE_PARTS))}


@pytest.mark.parametrize("module", sorted({entry.target.split(":")[0] for entry in COMMANDS.values()}))
def test_a_command_module_imports_nothing_heavy_until_it_runs(module: str) -> None:
    probe = (
        f"import sys, {module}\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} "
        f"or m.startswith({(*SERVE_PARTS, 'emceepee_cli.store', 'emceepee_cli.server')!r})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_value_completion_offers_server_names_task_statuses_and_hosts(emceepee_home: Path) -> None:
    emceepee_home.mkdir()
    write_config(
        emceepee_home / "config.toml", '[servers.git]\ncommand = "x"\n', '[servers.gh]\nurl = "https://x"\n'
    )

    def complete(words: str) -> list[str]:
        env = {
            **os.environ,
            "_EMCEEPEE_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split(" ")) - 1),
        }
        done = subprocess.run(
            [sys.executable, "-m", "emceepee_cli"], capture_output=True, text=True, env=env, timeout=60
        )
        return done.stdout.split()

    assert complete("emceepee servers remove g") == ["git", "gh"]
    assert complete("emceepee call g") == ["git", "gh"]
    assert complete("emceepee tasks list --status c") == ["completed", "cancelled"]
    assert complete("emceepee install cl") == ["claude-desktop", "claude-code"]
    assert complete("emceepee servers add g") == []  # a new name: nothing to offer


def test_serve_in_a_terminal_says_it_waits_for_a_host_on_stdin(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", "")
    term = Terminal("serve", "--config", str(config), env={**os.environ})
    term.expect("waiting for an MCP host on stdin")
    term.expect("emceepee install HOST")
    os.write(term.master, b"\x04")  # Ctrl-D: stdin ends, serve stops
    assert term.finish() == 0


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_help_of_a_command_is_its_own(name: str) -> None:
    """`emceepee --help` lists commands without loading them: their one-line help must not drift."""
    assert COMMANDS[name].help == COMMANDS[name].load(name).get_short_help_str(limit=1000)


def test_value_completion_offers_task_and_question_ids_from_the_journal(emceepee_home: Path) -> None:
    journal = Journal()
    at = now_iso()
    task = {"instance_id": "i", "server": "echo", "tool": "slow", "args": {}, "status": "working"}
    journal.tasks.insert(
        as_task_row(
            {**task, "task_id": "01TASKAAAAAAAAAAAAAAAAAAAA", "created_at": at, "last_updated_at": at}
        )
    )
    question = {
        "instance_id": "i",
        "server": "tracker",
        "kind": "elicitation",
        "params": {},
        "status": "pending",
    }
    journal.pending.insert(
        as_pending_row(
            {**question, "request_id": "01ASKBBBBBBBBBBBBBBBBBBBBB", "created_at": at, "expires_at": at}
        )
    )
    journal.close()

    def complete(words: str) -> list[str]:
        env = {**os.environ, "_EMCEEPEE_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": "3"}
        done = subprocess.run(
            [sys.executable, "-m", "emceepee_cli"], capture_output=True, text=True, env=env, timeout=60
        )
        return done.stdout.split()

    assert complete("emceepee tasks show 01T") == ["01TASKAAAAAAAAAAAAAAAAAAAA"]
    assert complete("emceepee tasks cancel 01") == ["01TASKAAAAAAAAAAAAAAAAAAAA"]
    env = {
        **os.environ,
        "_EMCEEPEE_COMPLETE": "complete_bash",
        "COMP_WORDS": "emceepee answer 01",
        "COMP_CWORD": "2",
    }
    done = subprocess.run(
        [sys.executable, "-m", "emceepee_cli"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.stdout.split() == ["01ASKBBBBBBBBBBBBBBBBBBBBB"]


def test_a_value_of_the_wrong_type_is_a_usage_error_naming_the_option() -> None:
    done = cli("logs", "-n", "many")
    assert done.code == 2 and "'many' is not a whole number" in done.err and "-n" in done.err
