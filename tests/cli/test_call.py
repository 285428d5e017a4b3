"""`emceepee tools` and `emceepee call` against example backends started for the command: text,
structured content, images, progress, errors, and questions answered in a terminal (a pty)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.cli.clirun import cli
from tests.support import Terminal, emceepee, example_table, payload, until_ready, write_config


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "config.toml",
        example_table("echo", "echo.py"),
        example_table("media", "media.py"),
        example_table("elicit", "elicit.py"),
        example_table("modern", "modern.py", protocol="modern"),
    )


def test_tools_json_is_what_the_list_tools_meta_tool_returns(config: Path) -> None:
    done = cli("tools", "echo", "--pattern", "add|slow", "--config", str(config), "--json")

    async def meta_tool() -> dict[str, Any]:
        async with emceepee(config) as client:
            await until_ready(client, "echo")
            return payload(await client.call_tool("list_tools", {"server": "echo", "pattern": "add|slow"}))

    expected = anyio.run(meta_tool)
    assert done.code == 0 and done.json() == expected
    assert [t["name"] for t in done.json()["servers"][0]["tools"]] == ["add", "slow", "add_tool"]


def test_tools_lists_every_enabled_backends_tools(config: Path) -> None:
    done = cli("tools", "--config", str(config))
    assert done.code == 0
    rows = [line.split(None, 2)[:2] for line in done.out.splitlines()]
    assert ["echo", "echo"] in rows and ["media", "pixel"] in rows and ["modern", "book"] in rows


def test_call_prints_text_and_structured_content(config: Path) -> None:
    text = cli("call", "echo", "echo", "text=hello there", "--config", str(config))
    added = cli("call", "echo", "add", "a=2", "b=3", "--config", str(config))
    assert text.code == 0 and text.out == "hello there\n"
    assert (
        added.code == 0
        and added.out.splitlines()[0] == "5"
        and json.loads(added.out.partition("\n")[2]) == {"sum": 5}
    )


def test_call_args_json_and_pairs_together(config: Path) -> None:
    done = cli("call", "media", "report", "--args", '{"n": 9}', "n=3", "--config", str(config))
    assert done.code == 0 and json.loads(done.out) == {
        "n": 3,
        "squares": [1, 4, 9],
    }  # text repeating it is shown once


def test_call_saves_an_image_and_binary_resources_to_files(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    image = cli("call", "media", "pixel", "color=blue", "--out", str(out), "--config", str(config))
    note = cli("call", "media", "note", "title=plan", "--out", str(out), "--config", str(config))
    assert image.code == 0 and f"[image image/png, saved to {out / 'pixel-1.png'}]" in image.out
    assert (out / "pixel-1.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "[resource note://plan]\n# plan" in note.out and (out / "note-1.bin").read_bytes() == b"\x00\x01"
    assert "[resource link note://plan/more (more)]" in note.out


def test_call_shows_the_backends_progress_on_stderr(config: Path) -> None:
    done = cli("call", "echo", "slow", "seconds=0.4", "steps=2", "--config", str(config))
    assert done.code == 0 and done.out == "slept 0.4 s\n"
    assert "… 1/2 step 1/2" in done.err and "… 2/2 step 2/2" in done.err


def test_a_tool_error_is_shown_and_exits_3(config: Path) -> None:
    done = cli("call", "echo", "fail", "message=it broke", "--config", str(config))
    as_json = cli("call", "echo", "fail", "message=it broke", "--config", str(config), "--json")
    assert done.code == 3 and done.out == "it broke\n" and "answered with an error" in done.err
    assert as_json.code == 3 and as_json.json()["isError"] is True and "error" not in as_json.json()


def test_a_backend_that_needs_urls_opened_first_shows_each_url_and_exits_3(tmp_path: Path) -> None:
    """A "URL elicitation required" answer reaches the person: every URL, with what it is for."""
    config = write_config(tmp_path / "config.toml", example_table("ua", "urlauth.py"))
    done = cli("call", "ua", "sync_all", "--config", str(config))
    assert done.code == 3, done.err
    assert done.err.count("open: https://auth.example.com/connect?elicitationId=") == 2, done.err
    assert "Authorize access to" in done.err and "run the same command again" in done.err


def test_arguments_that_do_not_match_the_schema_are_refused_before_sending(config: Path) -> None:
    done = cli("call", "echo", "add", "a=two", "b=3", "--config", str(config))
    assert (
        done.code == 2
        and "args.a: \"two\" is not of type 'number'" in done.err
        and "Nothing was sent" in done.err
    )


def test_an_unknown_tool_or_server_is_named_with_what_exists(config: Path) -> None:
    tool = cli("call", "echo", "ad", "--config", str(config))
    server = cli("call", "ecco", "add", "--config", str(config))
    assert tool.code == 2 and "has no tool 'ad'" in tool.err and "Did you mean: add" in tool.err
    assert server.code == 2 and "Unknown server 'ecco'" in server.err


def test_without_a_terminal_a_question_is_declined_and_said_so(config: Path) -> None:
    done = cli("call", "elicit", "ask", "--config", str(config))
    assert done.code == 0 and done.out == "declined\n"
    assert "no terminal to ask it on: declined it" in done.err


def test_a_question_is_answered_in_the_terminal(tmp_path: Path) -> None:
    log = tmp_path / "answers.log"
    table = example_table("elicit", "elicit.py", env={"EMCEEPEE_EXAMPLE_LOG": str(log)})
    config = write_config(tmp_path / "asks.toml", table)
    term = Terminal(
        "call", "elicit", "ask", "question=Who are you?", "--config", str(config), env={**os.environ}
    )
    term.expect("Backend 'elicit' asks:")
    term.expect("Who are you?")
    term.expect("Name (required)")
    term.type("Ada")
    term.expect("Age")
    term.type("")
    term.expect("Favourite colour")
    term.type("2")
    term.expect("hello Ada")
    assert term.finish() == 0
    assert json.loads(log.read_text().split(" ", 1)[1]) == {
        "action": "accept",
        "content": {"name": "Ada", "color": "green"},
    }


def test_a_2026_backends_input_rounds_are_answered_in_the_terminal(config: Path) -> None:
    term = Terminal("call", "modern", "book", "city=Lisbon", "--config", str(config), env={**os.environ})
    term.expect("Backend 'modern' asks:")
    term.type("2026-05-01")
    term.expect("Your reply")
    term.type("Hotel Avenida")
    term.expect("booked Hotel Avenida in Lisbon on 2026-05-01")
    assert term.finish() == 0


def test_a_tool_the_config_denies_is_hidden_and_refused_from_the_cli_too(tmp_path: Path) -> None:
    config = write_config(tmp_path / "deny.toml", example_table("echo", "echo.py", tools={"deny": ["fail*"]}))
    listed = cli("tools", "echo", "--config", str(config), "--json")
    called = cli("call", "echo", "fail", "--config", str(config))
    names = [t["name"] for t in listed.json()["servers"][0]["tools"]]
    assert "echo" in names and "fail" not in names
    assert called.code != 0 and "denied by emceepee's config" in called.err


def test_call_is_admitted_by_the_rule_serve_uses_deny_then_listed_then_schema(tmp_path: Path) -> None:
    record = tmp_path / "chain.log"
    table = example_table(
        "chain", "chain.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}, tools={"deny": ["delete_*"]}
    )
    config = str(write_config(tmp_path / "chain.toml", table))
    denied = cli("call", "chain", "delete_draft", "draft_id=d", "--config", config, "--json")
    unlisted = cli("call", "chain", "step_d", "--config", config, "--json")
    mistyped = cli("call", "chain", "step_b", "--args", '{"value": 42}', "--config", config, "--json")
    assert denied.code == 2 and denied.json()["error"] == {
        "type": "ToolDenied",
        "message": "chain.delete_draft is denied by emceepee's config "
        "([servers.chain] tools.deny = ['delete_*'] ('delete_*' matches)). Nothing was sent.",
        "hint": "Change that rule in [servers.chain] if it should be callable "
        "(emceepee servers show chain names the file).",
    }
    assert unlisted.code == 2 and unlisted.json()["error"] == {
        "type": "NotFound",
        "message": "Backend 'chain' has no tool 'step_d'. Did you mean: step_c, step_b, step_a?",
        "hint": "List its tools with emceepee tools chain.",
    }
    assert mistyped.code == 2 and mistyped.json()["error"] == {
        "type": "UsageError",
        "message": "Arguments for chain.step_b do not match its input schema:\n"
        "- args: 'via' is a required property\n- args.value: 42 is not of type 'string'",
        "hint": "Nothing was sent. See the schema with: emceepee tools chain --pattern '^step_b$' --json",
    }
    assert not record.exists()  # no call reached the backend
