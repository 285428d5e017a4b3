"""Faults in a call, injected through the real `emceepee serve`: each call fails alone, serve carries on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from tests.support import (
    Gate,
    example_table,
    hostile_table,
    payload,
    serving,
    still_answering,
    texts,
    write_config,
)

pytestmark = pytest.mark.anyio


async def test_a_malformed_backend_result_fails_that_call_only(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("bad"))
    gate = Gate(tmp_path / "gate")
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_tools", {})
            slow = payload(  # in flight on the same backend until the gate opens
                await client.call_tool(
                    "execute_tool",
                    {"server": "bad", "tool": "gated", "args": gate.args("done"), "timeout_ms": 10},
                )
            )
            malformed = await client.call_tool(
                "execute_tool", {"server": "bad", "tool": "malformed", "args": {}}
            )
            await still_answering(client)
            echo = await client.call_tool(
                "execute_tool", {"server": "bad", "tool": "echo", "args": {"text": "ok"}}
            )
            gate.open()
            finished = await client.call_tool("get_task_result", {"task_id": slow["proxy_task"]["task_id"]})
            servers = payload(await client.call_tool("list_servers", {}))["servers"]
    assert malformed.is_error
    assert (
        "Backend 'bad' sent an answer to tools/call 'malformed' that emceepee cannot use"
        in texts(malformed)[0]
    )
    assert "not a list" not in texts(malformed)[0] or len(texts(malformed)[0]) < 2000
    assert texts(echo) == ["ok"]
    assert texts(finished) == ["done"], "a call in flight on the same backend was lost"
    assert servers[0]["status"] == "ready"


async def test_a_question_the_journal_cannot_record_is_refused_not_listed_forever(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", example_table("elicit", "elicit.py", elicitation="park"))
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_tools", {})
            journal = Path(tmp_path / "emceepee-home" / "data" / "journal.db")
            with sqlite3.connect(journal) as db:  # a real write failure, from SQLite itself
                db.execute(
                    "CREATE TRIGGER refuse BEFORE INSERT ON pending"
                    " BEGIN SELECT RAISE(ABORT, 'injected'); END"
                )
            asked = await client.call_tool(
                "execute_tool",
                {"server": "elicit", "tool": "ask", "args": {"question": "Name?"}, "timeout_ms": 20000},
            )
            listed = payload(await client.call_tool("get_elicitations", {}))
            await still_answering(client)
    shown = " ".join(texts(asked, with_envelope=True))
    assert "pending_refused" in shown and "could not record" in shown, shown
    assert listed["elicitations"] == []


async def test_a_backend_schema_pattern_that_backtracks_cannot_block_serve(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("bad"))
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_tools", {})
            slow_to_judge = {"s": "a" * 60 + "!"}  # `(a|aa)+$` backtracks on every split of the a's
            passed = await client.call_tool(
                "execute_tool", {"server": "bad", "tool": "pattern_arg", "args": slow_to_judge}
            )
            await still_answering(client)
            refused = await client.call_tool(
                "execute_tool", {"server": "bad", "tool": "pattern_arg", "args": {"s": "b"}}
            )
    assert texts(passed) == [slow_to_judge["s"]], (
        "a pattern that cannot be judged in time is left to the backend"
    )
    assert refused.is_error and "does not match" in texts(refused)[0]
