"""Questions alone: built from a real journal, events and a task group, with no server and no host."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from emceepee_cli.config import Defaults
from emceepee_cli.errors import BackendError, UsageError
from emceepee_cli.questions.answers import backend_reply
from emceepee_cli.store.records import BadTransition
from tests.core.parts import INSTANCE, parts
from tests.support import status_of

pytestmark = pytest.mark.anyio

FORM = {
    "message": "Who are you?",
    "requested_schema": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name"],
    },
}
SAMPLE = {"messages": [{"role": "user", "content": {"type": "text", "text": "Sum up"}}], "max_tokens": 9}


async def test_a_question_is_journaled_announced_and_listed_until_answered(tmp_path: Path) -> None:
    async with parts(tmp_path) as p:
        asked = await p.questions.ask("srv", "elicitation", FORM, task_id="T1", correlation="sole")
        row = p.journal.pending.row(asked.request_id)
        listed = p.questions.listed(server="srv")
        pending = p.questions.for_client()
        answered = await p.questions.answer(
            asked.request_id[:12], {"action": "accept", "content": {"name": "Ada"}}, by="model"
        )
        with anyio.fail_after(5):
            final = await p.questions.wait(asked)
        taken = p.events.take()
    assert row is not None and row["status"] == "pending" and row["instance_id"] == INSTANCE
    assert p.waiting == [("srv", "T1")]
    assert [q["request_id"] for q in listed] == [asked.request_id] and listed[0]["task_id"] == "T1"
    assert pending["elicitations"] == listed and pending["sampling_requests"] == []
    assert answered["status"] == "accepted" and answered["answered_by"] == "model"
    assert backend_reply(final) == types.ElicitResult(action="accept", content={"name": "Ada"})
    assert [e["type"] for e in taken] == ["pending_request", "pending_settled"]
    assert p.questions.listed() == [] and p.questions.for_client() == {}


async def test_an_answer_that_breaks_the_schema_is_refused_and_the_question_stays(tmp_path: Path) -> None:
    async with parts(tmp_path) as p:
        asked = await p.questions.ask("srv", "elicitation", FORM, task_id=None, correlation="server")
        with pytest.raises(UsageError) as wrong:
            await p.questions.answer(
                asked.request_id, {"action": "accept", "content": {"age": -1}}, by="model"
            )
        with pytest.raises(UsageError) as not_an_action:
            await p.questions.answer(asked.request_id, {"action": "maybe"}, by="model")
        with pytest.raises(UsageError) as wrong_kind:
            await p.questions.answer(asked.request_id, {"action": "decline"}, by="model", kind="sampling")
        await p.questions.answer(asked.request_id, {"action": "decline"}, by="host")
        with pytest.raises(UsageError) as second:
            await p.questions.answer(asked.request_id, {"action": "cancel"}, by="model")
    assert (
        "content: 'name' is a required property" in wrong.value.message
        and "content.age" in wrong.value.message
    )
    assert "accept, decline or cancel" in not_an_action.value.message
    assert wrong_kind.value.hint == "Answer it with respond_to_elicitation."
    assert second.value.message == f"Request {asked.request_id} was already declined by host."


async def test_an_answer_another_process_wrote_is_picked_up_by_sync(tmp_path: Path) -> None:
    async with parts(tmp_path) as p:
        asked = await p.questions.ask("srv", "sampling", SAMPLE, task_id=None, correlation="server")
        answer = {"role": "assistant", "content": {"type": "text", "text": "done"}, "model": "cli"}
        assert p.journal.pending.settle(asked.request_id, "completed", answer=answer, by="cli")
        await p.questions.sync()
        with anyio.fail_after(5):
            final = await p.questions.wait(asked)
    reply = backend_reply(final)
    assert isinstance(reply, types.CreateMessageResult) and reply.model == "cli"


async def test_a_question_nobody_answers_expires_and_the_backend_hears_a_timeout(tmp_path: Path) -> None:
    async with parts(tmp_path, Defaults(pending_timeout_ms=1)) as p:
        asked = await p.questions.ask("srv", "elicitation", FORM, task_id=None, correlation="server")
        await anyio.sleep(0.01)  # its 1 ms passes
        await p.questions.expire_due()  # as the watcher does, ten times a second
        with anyio.fail_after(5):
            final = await p.questions.wait(asked)
    reply = backend_reply(final)
    assert final["status"] == "expired" and final["error"] == "nobody answered in time"
    assert isinstance(reply, types.ErrorData) and reply.code == types.REQUEST_TIMEOUT


async def test_withdrawn_and_abandoned_questions_are_rejected(tmp_path: Path) -> None:
    async with parts(tmp_path) as p:
        of_call = await p.questions.ask("srv", "elicitation", FORM, task_id="T9", correlation="exact")
        await p.questions.withdraw("T9", "its call was cancelled")
        abandoned = await p.questions.ask("srv", "elicitation", FORM, task_id=None, correlation="server")
        with anyio.move_on_after(0.05):  # the backend withdraws: its wait is cancelled
            await p.questions.wait(abandoned)
        rows = {r["request_id"]: r for r in p.journal.pending.rows(status=None)}
    assert rows[of_call.request_id]["status"] == "rejected"
    assert rows[of_call.request_id]["error"] == "its call was cancelled"
    assert rows[abandoned.request_id]["status"] == "rejected"
    assert "withdrew the request" in str(rows[abandoned.request_id]["error"])
    assert p.questions.unanswered() == []


async def test_a_question_the_journal_cannot_take_is_refused_and_said_why(tmp_path: Path) -> None:
    async with parts(tmp_path) as p:
        with sqlite3.connect(tmp_path / "journal.db") as db:  # a real write failure, from SQLite itself
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON pending BEGIN SELECT RAISE(ABORT, 'full'); END"
            )
        with pytest.raises(BackendError) as refused:
            await p.questions.ask("srv", "sampling", SAMPLE, task_id="T1", correlation="sole")
        taken = p.events.take()
    assert "asked a sampling question that was refused" in refused.value.message
    assert [e["type"] for e in taken] == ["pending_refused"] and "full" in taken[0]["data"]["error"]
    assert p.logged and p.logged[0][:2] == ("srv", "error") and p.questions.listed() == []


async def test_without_a_host_session_a_question_is_parked_whatever_the_policy(tmp_path: Path) -> None:
    async with parts(tmp_path, policy="forward") as p:
        asked = await p.questions.ask("srv", "elicitation", FORM, task_id=None, correlation="server")
    assert not asked.forwarding and p.waiting == [("srv", None)]


async def test_an_adopted_calls_questions_are_held_again_open_or_settled(tmp_path: Path) -> None:
    async with parts(tmp_path) as p:
        open_ = await p.questions.ask("srv", "elicitation", FORM, task_id="T1", correlation="exact")
        done = await p.questions.ask("srv", "elicitation", FORM, task_id="T1", correlation="exact")
        await p.questions.answer(done.request_id, {"action": "decline"}, by="model")
        p.questions.live.clear()  # as a new process that never held them
        rows = {r["request_id"]: r for r in p.journal.pending.rows(status=None)}
        held_open, held_done = (
            p.questions.adopt(rows[open_.request_id]),
            p.questions.adopt(rows[done.request_id]),
        )
    assert not held_open.answered.is_set() and p.questions.unanswered() == [open_.request_id]
    assert held_done.answered.is_set() and held_done.row["status"] == "declined"


async def test_a_status_outside_the_transition_table_is_a_bug_and_raised(tmp_path: Path) -> None:
    async with parts(tmp_path) as p:
        asked = await p.questions.ask("srv", "sampling", SAMPLE, task_id=None, correlation="server")
        with pytest.raises(BadTransition):
            await p.questions.settle(asked.request_id, "accepted")  # an elicitation's end, not sampling's
        assert status_of(p.journal.pending.row(asked.request_id)) == "pending"
