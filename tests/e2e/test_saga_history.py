"""resume_tool as a client following the saga design sends it, to a real `emceepee serve`: the whole
history of completed steps each time, `stepId`, and a JSON-RPC error object."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.e2e.test_chains import started
from tests.support import example_table, payload, serving, texts, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "backend.log"


@pytest.fixture
def modern_config(tmp_path: Path, record: Path) -> Path:
    env = {"EMCEEPEE_EXAMPLE_LOG": str(record)}
    return write_config(
        tmp_path / "config.toml", example_table("modern", "modern.py", env=env, protocol="modern")
    )


@pytest.fixture
def elicit_config(tmp_path: Path, record: Path) -> Path:
    env = {"EMCEEPEE_EXAMPLE_LOG": str(record)}
    return write_config(tmp_path / "config.toml", example_table("elicit", "elicit.py", env=env))


async def resume(client: Client, token: str, steps: list[dict[str, Any]]) -> Any:
    return await client.call_tool("resume_tool", {"saga_token": token, "completed_steps": steps})


async def test_a_repeated_step_with_another_answer_is_refused_and_nothing_changes(
    modern_config: Path, record: Path
) -> None:
    async with serving(modern_config) as client:
        with anyio.fail_after(40):
            await started(client)
            first = payload(
                await client.call_tool(
                    "execute_tool", {"server": "modern", "tool": "book", "args": {"city": "Oslo"}}
                )
            )
            [date] = first["saga"]["steps"]
            date_answer = {
                "stepId": date["step_id"],
                "result": {"action": "accept", "content": {"date": "2026-05-01"}},
            }
            second = payload(await resume(client, first["saga"]["saga_token"], [date_answer]))
            [hotel] = second["saga"]["steps"]
            changed = {"stepId": date["step_id"], "result": {"date": "2026-06-30"}}
            hotel_answer = {"stepId": hotel["step_id"], "result": "Grand"}
            conflict = await resume(client, second["saga"]["saga_token"], [hotel_answer, changed])
            still = payload(await client.call_tool("get_task", {"task_id": first["proxy_task"]["task_id"]}))
            done = await resume(client, still["saga"]["saga_token"], [date_answer, hotel_answer])
    assert conflict.is_error and "already accepted by model with a different answer" in texts(conflict)[0]
    assert [s["step_id"] for s in still["saga"]["steps"]] == [
        hotel["step_id"]
    ]  # the hotel step was not answered
    assert texts(done) == ["booked Grand in Oslo on 2026-05-01"]


async def test_an_error_object_reaches_a_handshake_era_backend_as_that_error(
    elicit_config: Path, record: Path
) -> None:
    async with serving(elicit_config) as client:
        with anyio.fail_after(40):
            await started(client)
            promoted = payload(
                await client.call_tool(
                    "execute_tool",
                    {"server": "elicit", "tool": "ask", "args": {"question": "Name?"}, "timeout_ms": 30_000},
                )
            )
            [step] = promoted["saga"]["steps"]
            error = {"code": -32001, "message": "the user closed the form", "data": {"why": "busy"}}
            done = await resume(
                client, promoted["saga"]["saga_token"], [{"stepId": step["step_id"], "error": error}]
            )
            again = await resume(
                client, promoted["saga"]["saga_token"], [{"stepId": step["step_id"], "error": error}]
            )
    assert done.is_error and "the user closed the form" in texts(done)[0]
    assert "error the user closed the form" in record.read_text()
    assert (
        not again.is_error or "different answer" not in texts(again)[0]
    )  # the same refusal again is a no-op
