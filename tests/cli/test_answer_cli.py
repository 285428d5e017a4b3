"""`emceepee pending` and `emceepee answer` on a real journal file, in-process and as real processes."""

from __future__ import annotations

import json
import os
import select
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from emceepee_cli import processes, start_tokens
from emceepee_cli.clock import now_iso
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import question_json
from tests.cli.clirun import cli as main_cli
from tests.cli.inproc import cli
from tests.support import Terminal, as_pending_row, as_task_row, run_cli

INSTANCE = "01INSTANCE"
FAKE_TTY = Path(__file__).parents[1] / "backends" / "fake_tty.py"  # a terminal a program makes, typing y
FORM = "01FORM00000000000000000000"
URL_Q = "01URL000000000000000000000"
SAMPLE = "01SAMPLE000000000000000000"
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name"},
        "color": {"type": "string", "enum": ["r", "g"]},
    },
    "required": ["name"],
}
URL_PARAMS = {
    "mode": "url",
    "message": "Sign in to the tracker",
    "url": "https://example.com/auth?x=1",
    "elicitation_id": "e-1",
}
SAMPLING_PARAMS = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Name a colour"}}],
    "max_tokens": 100,
}


def ask(
    journal: Journal,
    request_id: str,
    params: dict[str, Any],
    *,
    kind: str = "elicitation",
    instance: str = INSTANCE,
    task_id: str | None = None,
    age_s: float = 0.0,
) -> None:
    journal.pending.insert(
        as_pending_row(
            {
                "request_id": request_id,
                "instance_id": instance,
                "server": "tracker",
                "kind": kind,
                "params": params,
                "status": "pending",
                "task_id": task_id,
                "correlation": "c-1",
                "created_at": now_iso(-age_s),
                "expires_at": now_iso(600),
            }
        )
    )


def stored(journal: Journal, request_id: str) -> dict[str, Any]:
    row = journal.pending.row(request_id)
    assert row is not None
    return dict(row)


@pytest.fixture
def journal() -> Journal:
    journal = Journal()
    journal.instances.register(INSTANCE)  # this test's own pid: the owner is alive
    return journal


@pytest.fixture
def dead_owner(journal: Journal) -> dict[str, Any]:
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    assert finished.wait(timeout=30) == 0
    row = {
        "instance_id": "01GONE",
        "pid": finished.pid,
        "machine": socket.gethostname(),
        "started_at": now_iso(-600),
        "heartbeat_at": now_iso(-300),
    }
    journal.db.table("instances").insert(row)
    return row


def test_pending_json_lists_open_questions_as_the_meta_tools_show_them(journal: Journal) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": SCHEMA}, age_s=200)
    ask(journal, URL_Q, URL_PARAMS, task_id="01TASK")
    ask(journal, SAMPLE, SAMPLING_PARAMS, kind="sampling")
    ask(journal, "01DONE00000000000000000000", {"message": "old", "requested_schema": SCHEMA})
    journal.pending.settle("01DONE00000000000000000000", "declined", answer={"action": "decline"}, by="host")
    listed = cli("pending", "--json")
    table = run_cli("pending", env={**os.environ, "COLUMNS": "250"})  # a real process: no cell wraps
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {
        "pending": [question_json(as_pending_row(stored(journal, i))) for i in (FORM, SAMPLE, URL_Q)]
    }
    assert table.returncode == 0
    for shown in (
        FORM,
        "Who files the bug?",
        "3m",
        "https://example.com/auth?x=1",
        "01TASK",
        "Name a colour",
        "sampling",
    ):
        assert shown in table.stdout
    assert "01DONE" not in table.stdout


def test_answer_content_accepts_with_the_content_and_records_the_cli(journal: Journal) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": SCHEMA})
    done = cli("answer", FORM, "--content", '{"name": "Ada", "color": "g"}')
    row = stored(journal, FORM)
    assert done.returncode == 0, done.stderr
    assert "Who files the bug?" in done.stdout and "tracker" in done.stdout
    assert f"Answered {FORM} (accepted)" in done.stdout and "within a moment" in done.stdout
    assert (row["status"], row["answered_by"]) == ("accepted", "cli")
    assert json.loads(row["answer"]) == {"action": "accept", "content": {"name": "Ada", "color": "g"}}


def test_an_answer_that_breaks_the_schema_is_refused_naming_the_field(journal: Journal) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": SCHEMA})
    wrong_type = cli("answer", FORM, "--content", '{"name": 3}')
    not_enum = cli("answer", FORM, "--content", '{"name": "Ada", "color": "purple"}')
    not_json = cli("answer", FORM, "--content", "{name: Ada}")
    assert (
        wrong_type.returncode == 2
        and "content.name" in wrong_type.stderr
        and "not of type 'string'" in wrong_type.stderr
    )
    assert not_enum.returncode == 2 and "content.color" in not_enum.stderr
    assert not_json.returncode == 2 and "not valid JSON" in not_json.stderr
    row = stored(journal, FORM)
    assert (row["status"], row["answer"], row["answered_by"]) == ("pending", None, None)


def test_decline_and_cancel_refuse_without_content(journal: Journal) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": SCHEMA})
    ask(journal, URL_Q, URL_PARAMS)
    declined = cli("answer", FORM, "--decline")
    cancelled = cli("answer", URL_Q, "--cancel")
    assert declined.returncode == 0 and cancelled.returncode == 0, (declined.stderr, cancelled.stderr)
    assert json.loads(stored(journal, FORM)["answer"]) == {"action": "decline"}
    assert stored(journal, FORM)["status"] == "declined"
    assert json.loads(stored(journal, URL_Q)["answer"]) == {"action": "cancel"}
    assert stored(journal, URL_Q)["status"] == "cancelled"


def test_a_sampling_request_is_answered_with_text(journal: Journal) -> None:
    ask(journal, SAMPLE, SAMPLING_PARAMS, kind="sampling")
    ask(journal, "01SAMPLE2", SAMPLING_PARAMS, kind="sampling")
    done = cli("answer", SAMPLE, "--text", "Teal")
    named = cli("answer", "01SAMPLE2", "--text", "Red", "--model", "me-1")
    assert done.returncode == 0 and named.returncode == 0, (done.stderr, named.stderr)
    assert "user: Name a colour" in done.stdout and f"Answered {SAMPLE} (completed)" in done.stdout
    assert stored(journal, SAMPLE)["status"] == "completed"
    assert json.loads(stored(journal, SAMPLE)["answer"]) == {
        "role": "assistant",
        "model": "human",
        "content": {"type": "text", "text": "Teal"},
    }
    assert json.loads(stored(journal, "01SAMPLE2")["answer"])["model"] == "me-1"


def test_the_second_answer_says_who_answered_first_and_changes_nothing(journal: Journal) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": SCHEMA})
    first = cli("answer", FORM, "--content", '{"name": "Ada"}')
    second = cli("answer", FORM, "--decline")
    assert first.returncode == 0, first.stderr
    assert second.returncode == 2 and "already accepted by cli" in second.stderr
    assert json.loads(stored(journal, FORM)["answer"]) == {"action": "accept", "content": {"name": "Ada"}}


def test_without_a_terminal_or_with_the_wrong_flags_it_names_the_right_ones(journal: Journal) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": SCHEMA})
    ask(journal, SAMPLE, SAMPLING_PARAMS, kind="sampling")
    form = cli("answer", FORM)
    sampling = cli("answer", SAMPLE)
    misfit = cli("answer", FORM, "--text", "hi")
    both = cli("answer", FORM, "--content", "{}", "--decline")
    assert form.returncode == 2 and "no terminal" in form.stderr
    assert all(flag in form.stderr for flag in ("--content", "--decline", "--cancel"))
    assert sampling.returncode == 2 and "--text TEXT" in sampling.stderr
    assert misfit.returncode == 2 and "--text does not apply" in misfit.stderr
    assert both.returncode == 2 and "only one of --content, --decline" in both.stderr
    assert stored(journal, FORM)["status"] == stored(journal, SAMPLE)["status"] == "pending"


def test_a_question_whose_process_is_gone_is_not_answered(
    journal: Journal, dead_owner: dict[str, Any]
) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": SCHEMA}, instance="01GONE")
    before = stored(journal, FORM)
    refused = cli("answer", FORM, "--content", '{"name": "Ada"}')
    assert refused.returncode == 2
    assert (
        "is gone" in refused.stderr
        and f"pid {dead_owner['pid']}" in refused.stderr
        and "last seen 5m ago" in refused.stderr
    )
    assert "Nothing was answered" in refused.stderr
    assert stored(journal, FORM) == before


def test_a_resumable_call_of_a_gone_process_is_answered_for_the_next_start(
    journal: Journal, dead_owner: dict[str, Any]
) -> None:
    at = now_iso()
    journal.tasks.insert(
        as_task_row(
            {
                "task_id": "01TASK",
                "instance_id": "01GONE",
                "server": "tracker",
                "tool": "file_bug",
                "args": {},
                "status": "working",
                "created_at": at,
                "last_updated_at": at,
            }
        )
    )
    journal.tasks.set_round("01TASK", "opaque-state", 1)
    ask(
        journal,
        FORM,
        {"message": "Who files the bug?", "requested_schema": SCHEMA},
        instance="01GONE",
        task_id="01TASK",
    )
    done = cli("answer", FORM, "--content", '{"name": "Ada"}')
    assert done.returncode == 0, done.stderr
    assert "when emceepee next starts" in done.stdout
    assert stored(journal, FORM)["status"] == "accepted"


def test_a_unique_prefix_picks_the_question_and_an_ambiguous_one_is_refused(journal: Journal) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": SCHEMA})
    ask(journal, "01FORX00000000000000000000", {"message": "Another", "requested_schema": SCHEMA})
    ambiguous = cli("answer", "01FOR", "--decline")
    done = cli("answer", "01form", "--decline")
    assert ambiguous.returncode == 2 and "matches 2 questions" in ambiguous.stderr
    assert done.returncode == 0, done.stderr
    assert stored(journal, FORM)["status"] == "declined"
    assert stored(journal, "01FORX00000000000000000000")["status"] == "pending"


def fake_browser(tmp_path: Path) -> tuple[dict[str, str], Path]:
    opened = tmp_path / "opened.txt"
    script = tmp_path / "browser"
    script.write_text(f'#!/bin/sh\nprintf "%s" "$1" > "{opened}"\n')
    script.chmod(0o755)
    return {**os.environ, "BROWSER": str(script)}, opened


def test_a_url_question_opens_the_url_and_is_accepted_without_content(
    journal: Journal, tmp_path: Path
) -> None:
    ask(journal, URL_Q, URL_PARAMS)
    env, opened = fake_browser(tmp_path)
    with_content = run_cli("answer", URL_Q, "--content", '{"token": "x"}')
    done = run_cli("answer", URL_Q, "--open", "--content", "{}", env=env)
    assert with_content.returncode == 2 and "takes no content" in with_content.stderr
    assert done.returncode == 0, done.stderr
    assert "URL: https://example.com/auth?x=1" in done.stdout
    assert opened.read_text() == "https://example.com/auth?x=1"
    assert (stored(journal, URL_Q)["status"], json.loads(stored(journal, URL_Q)["answer"])) == (
        "accepted",
        {"action": "accept"},
    )


# ---- at a real terminal ----------------------------------------------------------------------------

FULL_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "description": "As it appears in the tracker"},
        "age": {"type": "integer", "title": "Age", "default": 30},
        "color": {
            "type": "string",
            "title": "Colour",
            "enum": ["r", "g", "b"],
            "enumNames": ["Red", "Green", "Blue"],
        },
        "size": {
            "type": "string",
            "title": "Size",
            "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
        },
        "subscribe": {"type": "boolean", "title": "Subscribe"},
        "nickname": {"type": "string", "title": "Nickname"},
    },
    "required": ["name", "color", "subscribe"],
}


def test_at_a_terminal_the_form_is_asked_field_by_field(journal: Journal) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": FULL_SCHEMA})
    term = Terminal("answer", FORM[:8])
    assert "Who files the bug?" in term.expect("Your name (required)")
    assert "As it appears in the tracker" in term.expect("[text] > ")
    term.type("")  # required: asked again
    term.expect("This field is required.")
    term.type("Ada")
    term.expect("[a whole number, Enter = 30] > ")
    term.type("")  # the default
    shown = term.expect("[1-3] > ")
    assert "Colour (required)" in shown and "1) Red (r)" in shown and "2) Green (g)" in shown
    term.type("2")
    assert "2) Large (l)" in term.expect("[1-2, Enter skips] > ")
    term.type("Large")  # a title (or value) works as well as a number
    assert "Subscribe (required)" in term.expect("[y/n] > ")
    term.type("maybe")
    term.expect("Answer y or n.")
    term.type("y")
    term.expect("Nickname")
    term.expect("[text, Enter skips] > ")
    term.type("")  # optional, no default: left out
    term.expect(f"Answered {FORM} (accepted)")
    assert term.finish() == 0
    row = stored(journal, FORM)
    assert (row["status"], row["answered_by"]) == ("accepted", "cli")
    assert json.loads(row["answer"]) == {
        "action": "accept",
        "content": {"name": "Ada", "age": 30, "color": "g", "size": "l", "subscribe": True},
    }


def test_at_a_terminal_a_url_question_is_opened_and_confirmed(journal: Journal, tmp_path: Path) -> None:
    ask(journal, URL_Q, URL_PARAMS)
    ask(journal, "01URLNOTDONE00000000000000", URL_PARAMS)
    env, opened = fake_browser(tmp_path)
    term = Terminal("answer", URL_Q, "--open", env=env)
    assert "https://example.com/auth?x=1" in term.expect("Done? [y/N] ")
    term.type("y")
    term.expect(f"Answered {URL_Q} (accepted)")
    assert term.finish() == 0
    not_done = Terminal("answer", "01URLNOTDONE")
    not_done.expect("Done? [y/N] ")
    not_done.type("")
    not_done.expect("still pending")
    assert not_done.finish() == 2
    assert opened.read_text() == "https://example.com/auth?x=1"
    assert json.loads(stored(journal, URL_Q)["answer"]) == {"action": "accept"}
    assert stored(journal, "01URLNOTDONE00000000000000")["status"] == "pending"


def test_at_a_terminal_a_sampling_request_asks_for_the_reply(journal: Journal) -> None:
    ask(journal, SAMPLE, SAMPLING_PARAMS, kind="sampling")
    term = Terminal("answer", SAMPLE)
    assert "user: Name a colour" in term.expect("> ")
    term.type("Teal")
    term.expect(f"Answered {SAMPLE} (completed)")
    assert term.finish() == 0
    assert json.loads(stored(journal, SAMPLE)["answer"])["content"] == {"type": "text", "text": "Teal"}


def test_answer_json_prints_the_outcome_as_respond_to_elicitation_does(journal: Journal) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": SCHEMA})
    done = cli("answer", FORM, "--content", '{"name": "Ada"}', "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)  # the whole of stdout is one document: the question is not shown
    assert out["answered"] == question_json(as_pending_row(stored(journal, FORM)))
    assert out["answered"]["status"] == "accepted" and "within a moment" in out["delivery"]


def test_without_a_terminal_the_fields_and_how_to_pass_them_are_shown(journal: Journal) -> None:
    ask(journal, FORM, {"message": "Who files the bug?", "requested_schema": SCHEMA})
    ask(journal, URL_Q, URL_PARAMS)
    form, url = cli("answer", FORM), cli("answer", URL_Q)
    as_json = main_cli("answer", FORM, "--json")
    old_style = main_cli("answer", FORM, "--json", '{"name": "Ada"}')
    assert form.returncode == 2
    assert "It asks: Who files the bug?" in form.stderr
    assert "name: text; required (Your name)" in form.stderr
    assert 'color: one of "r", "g"; optional' in form.stderr
    assert f"""emceepee answer {FORM} --content '{{"name": "…"}}'""" in form.stderr
    assert url.returncode == 2 and "URL: https://example.com/auth?x=1" in url.stderr
    assert "--content '{}'" in url.stderr
    error = as_json.json()["error"]
    assert as_json.code == 2 and "no terminal" in error["message"]
    assert "name: text; required" in error["message"] and "--content" in error["hint"]
    assert old_style.code == 2 and "--content '{...}'" in old_style.out
    assert stored(journal, FORM)["status"] == stored(journal, URL_Q)["status"] == "pending"


APPROVAL = "01APPROVAL0000000000000000"
APPROVAL_DETAILS = {
    "tool": "delete_draft",
    "arguments": {"draft_id": "d1", "note": "\x1b[2Jgone\u202e"},  # a clear-screen and a bidi mark
    "reason": "destructiveHint (confirm_destructive)",
    "step": 1,
    "by": ["host", "cli"],
}
CLI_ARGS = [sys.executable, "-m", "emceepee_cli", "answer"]


def ask_approval(journal: Journal, request_id: str = APPROVAL) -> None:
    """An approval as serve journals one: an empty form, with what it is about beside it."""
    params = {
        "mode": "form",
        "message": "Allow tracker.delete_draft?",
        "requested_schema": {"type": "object"},
    }
    ask(journal, request_id, params, task_id="01TASK")
    details = {"purpose": "approval", "approval": json.dumps(APPROVAL_DETAILS)}
    journal.db.table("pending").update(request_id, details)


def half_terminal(request_id: str, on_terminal: str) -> tuple[int, str]:
    """`emceepee answer ID` with only stdin or only stdout on a pseudo-terminal, the other a pipe,
    and `y` typed (or piped) in; its exit code and everything it wrote."""
    master, slave = os.openpty()
    stdin = slave if on_terminal == "stdin" else subprocess.PIPE
    stdout = slave if on_terminal == "stdout" else subprocess.PIPE
    process = subprocess.Popen([*CLI_ARGS, request_id], stdin=stdin, stdout=stdout, stderr=subprocess.PIPE)
    os.close(slave)
    if on_terminal == "stdin":
        os.write(master, b"y\n")
    out, err = process.communicate(b"y\ny\n" if on_terminal == "stdout" else None, timeout=60)
    shown = b""
    while select.select([master], [], [], 0)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: nothing more
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return process.returncode, (out or b"").decode() + shown.decode(errors="replace") + err.decode()


def test_an_approval_is_never_accepted_without_a_terminal_but_may_be_declined(journal: Journal) -> None:
    ask_approval(journal)
    content = run_cli("answer", APPROVAL, "--content", "{}")
    bare = cli("answer", APPROVAL)  # stdin not a terminal
    scripted = run_cli("answer", APPROVAL, "--json", "--content", "{}")
    piped = subprocess.run(
        [*CLI_ARGS, APPROVAL], input="y\n" * 100, capture_output=True, text=True, timeout=60
    )
    still = stored(journal, APPROVAL)["status"]
    declined = run_cli("answer", APPROVAL, "--decline")
    for refused in (content, bare, piped):
        assert refused.returncode == 2, refused
        assert (
            f"Approval {APPROVAL} is accepted only by a person answering y to it at a terminal"
            in refused.stderr
        )
        assert (
            "it is still pending" in refused.stderr
            and f"emceepee answer {APPROVAL} --decline" in refused.stderr
        )
    assert "--content cannot accept it" in content.stderr
    assert (
        "the input here is not a terminal" in bare.stderr
        and "the input here is not a terminal" in piped.stderr
    )
    assert scripted.returncode == 2 and json.loads(scripted.stdout)["error"]["type"] == "UsageError"
    assert still == "pending"
    assert declined.returncode == 0, declined.stderr
    row = stored(journal, APPROVAL)
    assert (row["status"], row["answered_by"]) == ("declined", "cli")


@pytest.mark.parametrize("on_terminal", ["stdin", "stdout"])
def test_an_approval_needs_both_stdin_and_stdout_on_a_terminal(journal: Journal, on_terminal: str) -> None:
    ask_approval(journal)
    code, said = half_terminal(APPROVAL, on_terminal)
    other = "output" if on_terminal == "stdin" else "input"
    assert code == 2, said
    assert f"the {other} here is not a terminal" in said and "Allow? [y/N]" not in said
    assert stored(journal, APPROVAL)["status"] == "pending"


@pytest.fixture
def owner_beside(journal: Journal) -> Iterator[None]:
    """The journal's live owner is a process beside this test's terminal, as a person's `serve` is
    (not above it: an approval is never accepted from under a serve)."""
    with subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    ) as owner:
        started = start_tokens.start_token(owner.pid)
        journal.db.execute(
            "UPDATE instances SET pid = ?, proc_start = ? WHERE instance_id = ?",
            [owner.pid, started, INSTANCE],
        )
        yield
        assert owner.stdin is not None
        owner.stdin.close()


def test_at_a_terminal_an_approval_shows_the_call_then_only_y_accepts_it(
    journal: Journal, owner_beside: None
) -> None:
    ask_approval(journal)
    ask_approval(journal, "01APPROVALNO00000000000000")
    term = Terminal("answer", APPROVAL)
    shown = term.expect("Allow? [y/N] ")
    term.type("y")
    term.expect(f"Answered {APPROVAL} (accepted)")
    assert term.finish() == 0
    no = Terminal("answer", "01APPROVALNO")
    no.expect("Allow? [y/N] ")
    no.type("yes please")
    no.expect("(declined)")
    assert no.finish() == 0
    assert "Tool: tracker.delete_draft" in shown and '"draft_id": "d1"' in shown
    assert "Reason: destructiveHint (confirm_destructive)" in shown
    assert "\\u001b[2Jgone\\u202e" in shown and "\x1b[2J" not in term.raw.decode(errors="replace")
    row = stored(journal, APPROVAL)
    assert (row["status"], row["answered_by"]) == ("accepted", "cli")
    assert stored(journal, "01APPROVALNO00000000000000")["status"] == "declined"


def test_a_terminal_under_more_processes_than_can_be_looked_through_never_accepts_an_approval(
    journal: Journal, owner_beside: None
) -> None:
    """Nesting past the number of processes `answer` looks through (to hide a serve above them)
    fails closed: the approval stays pending."""
    ask_approval(journal)
    answer = shlex.join([sys.executable, "-m", "emceepee_cli", "answer", APPROVAL])
    deep = processes.MAX_ANCESTORS + 5
    nested = f"f() {{ if [ $1 -gt 0 ]; then (f $(($1 - 1))); else {answer}; fi; }}; f {deep}"
    done = subprocess.run(
        [sys.executable, str(FAKE_TTY), "bash", "-c", nested],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"it runs under more than {processes.MAX_ANCESTORS} processes" in done.stdout
    assert "Allow? [y/N]" not in done.stdout
    assert stored(journal, APPROVAL)["status"] == "pending"


def test_at_a_terminal_under_a_serve_an_approval_is_never_accepted(journal: Journal) -> None:
    """This test's process owns the journal, as a serve would: a terminal it made (as a backend's
    program could) is not a person's, and the approval stays pending."""
    ask_approval(journal)
    term = Terminal("answer", APPROVAL)
    term.expect("runs under emceepee serve")
    assert term.finish() == 2
    assert "Allow? [y/N]" not in term.text
    assert stored(journal, APPROVAL)["status"] == "pending"
