"""Tasks alone: calls on real example backends, built from a real journal, events, questions and a
task group, with no server: answered in time, promoted, ended, cancelled, expired, kept in memory
when the journal fails, and 2026-07-28 rounds."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from emceepee_cli import seal
from emceepee_cli.backends.backend import Backend
from emceepee_cli.calls.call import CallAnswer, ProxyTask, TaskAnswer, TaskEnded, WorkingTask
from emceepee_cli.calls.tasks import Tasks
from emceepee_cli.config import Defaults
from emceepee_cli.errors import UsageError
from tests.core.parts import Parts, example, hostile, parts, started
from tests.support import Gate, status_of

pytestmark = pytest.mark.anyio

WAIT_S = 30


@asynccontextmanager
async def tasks(
    tmp_path: Path, defaults: Defaults | None = None
) -> AsyncIterator[tuple[Tasks, Parts, dict[str, Backend], Path]]:
    """Tasks over the echo and modern example backends and hostile.py (as "h", for its gates); the
    file echo records what it saw."""
    record = tmp_path / "backend.log"
    defaults = defaults or Defaults()
    async with parts(tmp_path, defaults) as p:
        backends = await started(
            p,
            example("echo", "echo.py", record),
            example("modern", "modern.py", protocol="modern"),
            hostile("h"),
        )
        built = Tasks(p.shared, p.questions, backends=backends.get, install_key=seal.install_key(tmp_path))
        p.questions.on_waiting(built.askers.question_arrived)
        try:
            yield built, p, backends, record
        finally:
            built.stop_all()
            for backend in backends.values():
                backend.stop()


def slow(seconds: float) -> dict[str, Any]:
    return {"seconds": seconds, "steps": 1}


def text(result: Any) -> str:
    assert isinstance(result, types.CallToolResult), result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def as_task(out: CallAnswer | TaskAnswer) -> dict[str, Any]:
    """An answer that is a task (the one a call became, or one still working), as the host reads it."""
    assert isinstance(out, ProxyTask | WorkingTask), out
    return out.payload()


def forget_calls(t: Tasks) -> None:
    """As if this process had ended: it no longer knows the calls it ran."""
    for call in t.calls:
        t.driver.calls.remove(call)


def types_of(p: Parts) -> list[str]:
    return [e["type"] for e in p.events.take()]


async def test_a_call_done_in_time_is_answered_and_no_task_exists(tmp_path: Path) -> None:
    async with tasks(tmp_path) as (t, p, backends, _):
        with anyio.fail_after(WAIT_S):
            result = await t.execute(backends["echo"], "echo", {"text": "hi"}, None, None)
    assert text(result) == "hi"
    assert p.journal.tasks.rows(include_finished=True) == [] and len(t.calls) == 0


async def test_a_slow_call_becomes_a_task_whose_end_is_journaled_and_announced(tmp_path: Path) -> None:
    gate = Gate(tmp_path / "gate")
    async with tasks(tmp_path) as (t, p, backends, _):
        with anyio.fail_after(WAIT_S):
            promoted = as_task(await t.execute(backends["h"], "gated", gate.args("done"), 10, None))
            task_id = promoted["proxy_task"]["task_id"]
            working = p.journal.tasks.row(task_id)
            listed = await t.list_tasks("h", None, False)
            busy = t.working()
            gate.open()
            result = await t.result(task_id[:10], 20_000, None)
        done = p.journal.tasks.row(task_id)
        announced = types_of(p)
    assert promoted["proxy_task"]["status"] == "working" and promoted["pending_on_server"]["server"] == "h"
    assert (
        working is not None
        and working["status"] == "working"
        and json.loads(working["args"] or "") == gate.args("done")
    )
    assert [x["task_id"] for x in listed["tasks"]] == [task_id]
    assert busy == [
        {"server": "h", "working_tasks": [{"task_id": task_id, "tool": "gated", "status": "working"}]}
    ]
    assert text(result) == "done"
    assert done is not None and done["status"] == "completed" and done["finished_at"]
    assert announced == ["task_created", "task_status"]


async def test_cancel_stops_the_backend_call_and_its_result_says_so(tmp_path: Path) -> None:
    async with tasks(tmp_path) as (t, _, backends, record):
        with anyio.fail_after(WAIT_S):
            promoted = as_task(await t.execute(backends["echo"], "slow", slow(30), 10, None))
            task_id = promoted["proxy_task"]["task_id"]
            cancelled = await t.cancel(task_id)
            await t.execute(backends["echo"], "echo", {"text": "after"}, None, None)  # it heard the cancel
            with pytest.raises(TaskEnded) as ended:
                await t.result(task_id, None, None)
            with pytest.raises(UsageError) as again:
                await t.cancel(task_id)
    assert cancelled["task"]["status"] == "cancelled"
    assert "cancelled" in ended.value.message and "already cancelled" in again.value.message
    assert record.read_text().splitlines() == ["started slow", "cancelled slow"]


async def test_a_cancel_another_process_asked_for_is_carried_out(tmp_path: Path) -> None:
    async with tasks(tmp_path) as (t, p, backends, _):
        with anyio.fail_after(WAIT_S):
            promoted = as_task(await t.execute(backends["echo"], "slow", slow(30), 10, None))
            task_id = promoted["proxy_task"]["task_id"]
            assert p.journal.tasks.request_cancel(task_id)  # as `emceepee tasks cancel` does
            await t.cancel_requested()  # as the watcher does when the journal changed
    assert status_of(p.journal.tasks.row(task_id)) == "cancelled"


async def test_a_task_past_its_ttl_expires(tmp_path: Path) -> None:
    async with tasks(tmp_path, Defaults(task_ttl_ms=200)) as (t, p, backends, _):
        with anyio.fail_after(WAIT_S):
            promoted = as_task(await t.execute(backends["echo"], "slow", slow(30), 10, None))
            await anyio.sleep(0.3)  # its TTL passes
            await t.expire_due()  # as the watcher does
    assert status_of(p.journal.tasks.row(promoted["proxy_task"]["task_id"])) == "expired"


async def test_a_task_the_journal_cannot_take_is_kept_in_memory_and_its_result_served(tmp_path: Path) -> None:
    gate = Gate(tmp_path / "gate")
    async with tasks(tmp_path) as (t, p, backends, _):
        with sqlite3.connect(tmp_path / "journal.db") as db:  # a real write failure, from SQLite itself
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON tasks BEGIN SELECT RAISE(ABORT, 'disk full'); END"
            )
        with anyio.fail_after(WAIT_S):
            promoted = as_task(await t.execute(backends["h"], "gated", gate.args("done"), 10, None))
            task_id = promoted["proxy_task"]["task_id"]
            shown = await t.get_json(task_id)
            gate.open()
            result = await t.result(task_id, 20_000, None)
            later = await t.get_json(task_id[:12])
    assert (
        "disk full" in promoted["journal_error"]["message"]
        and "restart would lose it" in promoted["journal_error"]["hint"]
    )
    assert shown["status"] == "working" and text(result) == "done" and later["status"] == "completed"
    assert p.journal.tasks.row(task_id) is None and task_id in t.recorder.unjournaled


async def test_a_modern_call_asks_in_rounds_journals_them_and_resumes_through_its_saga(
    tmp_path: Path,
) -> None:
    async with tasks(tmp_path) as (t, p, backends, _):
        with anyio.fail_after(WAIT_S):
            first = as_task(await t.execute(backends["modern"], "book", {"city": "Oslo"}, None, None))
            task_id = first["proxy_task"]["task_id"]
            row = p.journal.tasks.row(task_id)
            [date] = first["saga"]["steps"]
            answers = [{"step_id": date["step_id"], "result": {"date": "2026-12-24"}}]
            second = as_task(await t.resume(first["saga"]["saga_token"], answers, None))
            [hotel] = second["saga"]["steps"]
            done = await t.resume(
                second["saga"]["saga_token"], [{"step_id": hotel["step_id"], "result": "Bristol"}], None
            )
    assert date["type"] == "elicitation" and date["correlation"] == "exact"
    assert row is not None and row["round"] == 1 and row["request_state"]
    assert hotel["type"] == "sampling"
    assert text(done) == "booked Bristol in Oslo on 2026-12-24"


async def test_a_question_is_tied_to_the_one_call_that_can_have_asked_it(tmp_path: Path) -> None:
    """The one call in flight (even one already waiting on a question of its own, asking another),
    else the one not already waiting on its own; none when several could have asked. Only a call's
    own question suspends it, or one tied to none when as many such questions wait as there are
    calls that can have asked them; a call that began after never."""
    gates = [Gate(tmp_path / f"gate{n}") for n in range(4)]
    form = {"mode": "form", "message": "?", "requested_schema": {"type": "object"}}

    async def start(gate: Gate) -> str:
        """A call held in flight by its gate, promoted after 10 ms: its task id."""
        promoted = as_task(await t.execute(backends["h"], "gated", gate.args(), 10, None))
        return str(promoted["proxy_task"]["task_id"])

    async def untied(could_ask: frozenset[str]) -> None:
        await p.questions.ask(
            "h", "elicitation", form, task_id=None, correlation="server", could_ask=could_ask
        )

    def suspended() -> dict[str, bool]:
        return {call.call_id: t.askers.suspended(call) for call in t.calls}

    async with tasks(tmp_path) as (t, p, backends, _):
        with anyio.fail_after(WAIT_S):
            first = await start(gates[0])
            alone = t.askers.could_ask("h")
            await p.questions.ask("h", "elicitation", form, task_id=first, correlation="sole")
            asking_again = t.askers.could_ask("h")
            second = await start(gates[1])
            beside_a_waiting_call = t.askers.could_ask("h")
            third = await start(gates[2])
            among_two = t.askers.could_ask("h")
            await untied(among_two)
            one_of_two = suspended()
            await untied(among_two)
            two_of_two = suspended()
            fourth = await start(gates[3])
            later = suspended()
            for gate in gates:
                gate.open()
    assert (alone, asking_again) == (frozenset([first]), frozenset([first]))
    assert (beside_a_waiting_call, among_two) == (frozenset([second]), frozenset([second, third]))
    assert one_of_two == {first: True, second: False, third: False}
    assert two_of_two == {first: True, second: True, third: True}
    assert later == {**two_of_two, fourth: False}


async def test_a_saga_step_refused_with_an_error_fails_the_call(tmp_path: Path) -> None:
    async with tasks(tmp_path) as (t, _, backends, _):
        with anyio.fail_after(WAIT_S):
            first = as_task(await t.execute(backends["modern"], "book", {"city": "Rome"}, None, None))
            [date] = first["saga"]["steps"]
            with pytest.raises(UsageError) as foreign:
                await t.resume(first["saga"]["saga_token"], [{"step_id": "01OTHER"}], None)
            with pytest.raises(TaskEnded) as ended:
                await t.resume(
                    first["saga"]["saga_token"], [{"step_id": date["step_id"], "error": "no dates"}], None
                )
    assert "is not a step of task" in foreign.value.message
    assert (
        "The client refused step" in ended.value.message and "no dates (code -32603)" in ended.value.message
    )


async def test_an_adopted_call_whose_server_is_gone_fails_with_the_reason(tmp_path: Path) -> None:
    async with tasks(tmp_path) as (t, _, backends, _):
        with anyio.fail_after(WAIT_S):
            first = as_task(await t.execute(backends["modern"], "book", {"city": "Oslo"}, None, None))
            task_id = first["proxy_task"]["task_id"]
            t.driver.backends = lambda server: None  # as if this process's config had no such server
            forget_calls(t)
            await t.adopt([task_id, "01NOSUCHTASK"])
            with pytest.raises(TaskEnded) as ended:
                await t.result(task_id, 20_000, None)
    assert "no longer configured" in ended.value.message


async def test_an_adopted_call_of_a_tool_denied_since_is_not_sent_again(tmp_path: Path) -> None:
    async with tasks(tmp_path) as (t, _, backends, _):
        with anyio.fail_after(WAIT_S):
            first = as_task(await t.execute(backends["modern"], "book", {"city": "Oslo"}, None, None))
            task_id = first["proxy_task"]["task_id"]
            modern = backends["modern"]
            modern.spec = dataclasses.replace(modern.spec, tools={"deny": ("bo*",)})  # the user denied it
            forget_calls(t)  # as if a new serve adopted the call
            await t.adopt([task_id])
            with pytest.raises(TaskEnded) as ended:
                await t.result(task_id, 20_000, None)
    assert "failed" in ended.value.message and "is denied by emceepee's config" in ended.value.message
