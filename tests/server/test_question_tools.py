"""Questions from backends: parked, forwarded, answered once, expired, rejected; sagas."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from emceepee_cli.config import load_config
from emceepee_cli.server.app import build_server
from emceepee_cli.store.journal import Journal
from tests.support import emceepee, envelope, example_table, payload, texts, until_event, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "backend.log"


def make_config(tmp_path: Path, record: Path, defaults: str = "", server: str = "elicit") -> Path:
    """A config with the one backend a test asks (each SDK backend costs a second of CPU to start)."""
    env = {"EMCEEPEE_EXAMPLE_LOG": str(record)}
    tables = {
        "elicit": example_table("elicit", "elicit.py", env=env),
        "sampling": example_table("sampling", "sampling.py", env=env),
        "modern": example_table("modern", "modern.py", env=env, protocol="modern"),
    }
    return write_config(tmp_path / "config.toml", defaults, tables[server])


@pytest.fixture
def config(tmp_path: Path, record: Path) -> Path:
    """The elicit backend, which most tests here ask their questions through."""
    return make_config(tmp_path, record)


@pytest.fixture
def sampling_config(tmp_path: Path, record: Path) -> Path:
    return make_config(tmp_path, record, server="sampling")


@pytest.fixture
def modern_config(tmp_path: Path, record: Path) -> Path:
    return make_config(tmp_path, record, server="modern")


async def ask(client: Client, question: str = "Who are you?") -> dict[str, Any]:
    """Call elicit.ask; it is promoted as soon as its question is parked (well before the timeout)."""
    result = await client.call_tool(
        "execute_tool",
        {"server": "elicit", "tool": "ask", "args": {"question": question}, "timeout_ms": 30_000},
    )
    return payload(result) | {"_envelope": envelope(result)}


async def test_a_parked_elicitation_is_answered_by_the_model_and_the_task_completes(
    config: Path, record: Path
) -> None:
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            promoted = await ask(client)
            listed = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
            request_id = listed[0]["request_id"]
            answered = payload(
                await client.call_tool(
                    "respond_to_elicitation",
                    {
                        "request_id": request_id[:12],
                        "action": "accept",
                        "content": {"name": "Ada", "age": 36},
                    },
                )
            )
            result = await client.call_tool("get_task_result", {"task_id": promoted["proxy_task"]["task_id"]})
            after = payload(await client.call_tool("get_elicitations", {}))
    question = listed[0]
    assert (
        question["message"] == "Who are you?"
        and question["server"] == "elicit"
        and question["status"] == "pending"
    )
    assert question["correlation"] == "sole" and question["task_id"] == promoted["proxy_task"]["task_id"]
    assert question["requested_schema"]["required"] == ["name"]
    assert promoted["_envelope"]["pending_client_action"]["elicitations"][0]["request_id"] == request_id
    saga = promoted["saga"]
    assert (
        saga["state"] == "suspended"
        and saga["steps"][0]["step_id"] == request_id
        and saga["steps"][0]["type"] == "elicitation"
    )
    assert answered["answered"]["status"] == "accepted" and answered["answered"]["answered_by"] == "model"
    assert texts(result) == ["hello Ada"]
    assert after == {"elicitations": []}
    assert 'answer {"action": "accept", "content": {"age": 36, "name": "Ada"}}' in record.read_text()


async def test_an_invalid_answer_is_refused_and_the_question_stays_pending(config: Path) -> None:
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            promoted = await ask(client)
            request_id = promoted["saga"]["steps"][0]["step_id"]
            wrong = await client.call_tool(
                "respond_to_elicitation",
                {"request_id": request_id, "action": "accept", "content": {"age": -1, "color": "pink"}},
            )
            still = payload(await client.call_tool("get_elicitations", {"server": "elicit"}))["elicitations"]
            results: list[Any] = []

            async def answer(name: str) -> None:
                results.append(
                    await client.call_tool(
                        "respond_to_elicitation",
                        {"request_id": request_id, "action": "accept", "content": {"name": name}},
                    )
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(answer, "first")
                tg.start_soon(answer, "second")
            result = await client.call_tool("get_task_result", {"task_id": promoted["proxy_task"]["task_id"]})
    message = texts(wrong)[0]
    assert wrong.is_error and "content: 'name' is a required property" in message
    assert "content.age" in message and "content.color" in message and "still pending" in message
    assert [q["request_id"] for q in still] == [request_id]
    winners = [r for r in results if not r.is_error]
    losers = [r for r in results if r.is_error]
    assert len(winners) == 1 and len(losers) == 1
    assert "already accepted by model" in texts(losers[0])[0]
    assert texts(result) in (["hello first"], ["hello second"])


async def test_a_host_that_can_elicit_gets_the_question_forwarded(config: Path) -> None:
    asked: list[str] = []

    async def host_form(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Bo"})

    async with Client(
        build_server(load_config(config)), mode="legacy", elicitation_callback=host_form
    ) as client:
        with anyio.fail_after(20):
            result = await client.call_tool(
                "execute_tool", {"server": "elicit", "tool": "ask", "args": {"question": "Name?"}}
            )
            tasks = payload(await client.call_tool("list_tasks", {"include_completed": True}))
    assert asked == ["Name?"]
    assert texts(result) == ["hello Bo"]  # answered inside the call: no task
    assert tasks == {"tasks": []}
    rows = Journal().pending.rows(status=None)
    assert [(r["status"], r["answered_by"]) for r in rows] == [("accepted", "host")]


async def test_a_host_that_fails_to_answer_leaves_the_question_parked(config: Path) -> None:
    async def broken_form(context: Any, params: types.ElicitRequestParams) -> types.ErrorData:
        return types.ErrorData(code=types.INTERNAL_ERROR, message="form crashed")

    async with Client(
        build_server(load_config(config)), mode="legacy", elicitation_callback=broken_form
    ) as client:
        with anyio.fail_after(20):
            promoted = await ask(client)
            request_id = promoted["saga"]["steps"][0]["step_id"]
            await client.call_tool("respond_to_elicitation", {"request_id": request_id, "action": "decline"})
            result = await client.call_tool("get_task_result", {"task_id": promoted["proxy_task"]["task_id"]})
    assert texts(result) == ["declined"]


async def test_sampling_is_answered_by_the_model(sampling_config: Path, record: Path) -> None:
    async with emceepee(sampling_config) as client:
        with anyio.fail_after(20):
            promoted = payload(
                await client.call_tool(
                    "execute_tool",
                    {
                        "server": "sampling",
                        "tool": "summarize",
                        "args": {"text": "a long story"},
                        "timeout_ms": 30_000,
                    },
                )
            )
            [request] = payload(await client.call_tool("get_sampling_requests", {}))["sampling_requests"]
            wrong_tool = await client.call_tool(
                "respond_to_elicitation", {"request_id": request["request_id"], "action": "decline"}
            )
            await client.call_tool(
                "respond_to_sampling",
                {"request_id": request["request_id"], "content": "short", "model": "me"},
            )
            result = await client.call_tool("get_task_result", {"task_id": promoted["proxy_task"]["task_id"]})
    assert request["kind"] == "sampling" and request["params"]["max_tokens"] == 100
    assert request["params"]["messages"][0]["content"]["text"] == "Summarize: a long story"
    assert wrong_tool.is_error and "respond_to_sampling" in texts(wrong_tool)[0]
    assert texts(result) == ["summary: short"]
    assert 'answer {"model": "me", "text": "short"}' in record.read_text()


async def test_an_unanswered_question_expires_and_the_backend_gets_an_error(
    tmp_path: Path, record: Path
) -> None:
    config = make_config(tmp_path, record, "[defaults]\npending_timeout_ms = 300\n")
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            promoted = await ask(client)
            await until_event(client, "completed", promoted["proxy_task"]["task_id"])
            result = await client.call_tool("get_task_result", {"task_id": promoted["proxy_task"]["task_id"]})
            left = payload(await client.call_tool("get_elicitations", {}))
    assert result.is_error and "expired" in texts(result)[0]  # the backend's own error result, passed through
    assert left == {"elicitations": []}
    [row] = Journal().pending.rows(status=None)
    assert row["status"] == "expired" and row["error"] == "nobody answered in time"


async def test_a_backend_dying_rejects_its_questions(config: Path) -> None:
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            promoted = await ask(client)
            servers = {r["name"]: r for r in payload(await client.call_tool("list_servers", {}))["servers"]}
            os.kill(servers["elicit"]["pid"], signal.SIGKILL)
            await until_event(client, "failed", promoted["proxy_task"]["task_id"])
            result = await client.call_tool("get_task_result", {"task_id": promoted["proxy_task"]["task_id"]})
            left = payload(await client.call_tool("get_elicitations", {}))
    assert result.is_error and "failed" in texts(result)[0]
    assert left == {"elicitations": []}
    [row] = Journal().pending.rows(status=None)
    assert row["status"] == "rejected" and "withdrew the request, or stopped" in (row["error"] or "")


async def test_a_modern_backend_suspends_twice_and_is_resumed_through_resume_tool(
    modern_config: Path, record: Path
) -> None:
    async with emceepee(modern_config) as client:
        with anyio.fail_after(30):
            first = payload(
                await client.call_tool(
                    "execute_tool", {"server": "modern", "tool": "book", "args": {"city": "Paris"}}
                )
            )
            [date_step] = first["saga"]["steps"]
            second = await client.call_tool(
                "resume_tool",
                {
                    "saga_token": first["saga"]["saga_token"],
                    "completed_steps": [{"step_id": date_step["step_id"], "result": {"date": "2026-08-01"}}],
                },
            )
            [hotel_step] = payload(second)["saga"]["steps"]
            done = await client.call_tool(
                "resume_tool",
                {
                    "saga_token": payload(second)["saga"]["saga_token"],
                    # as a client following the saga design sends it: every step completed so far
                    "completed_steps": [
                        {"stepId": date_step["step_id"], "result": {"date": "2026-08-01"}},
                        {"stepId": hotel_step["step_id"], "result": "Hotel Lutetia"},
                    ],
                },
            )
    assert date_step["type"] == "elicitation" and date_step["correlation"] == "exact"
    assert date_step["params"]["requestedSchema"]["required"] == ["date"]  # the request's params, exactly
    assert date_step["params"]["mode"] == "form" and "correlation" not in date_step["params"]
    assert hotel_step["type"] == "sampling" and hotel_step["params"]["maxTokens"]
    assert "Paris" in hotel_step["params"]["messages"][0]["content"]["text"]
    assert texts(done) == ["booked Hotel Lutetia in Paris on 2026-08-01"]
    assert record.read_text().count("answer ") == 2


async def test_a_tampered_or_foreign_saga_token_is_refused(modern_config: Path) -> None:
    async with emceepee(modern_config) as client:
        with anyio.fail_after(30):
            first = payload(
                await client.call_tool(
                    "execute_tool", {"server": "modern", "tool": "book", "args": {"city": "Rome"}}
                )
            )
            token = first["saga"]["saga_token"]
            step = first["saga"]["steps"][0]["step_id"]
            body, mac = token.split(".")
            tampered = await client.call_tool(
                "resume_tool",
                {
                    "saga_token": body[:-2] + ("AA" if body[-2:] != "AA" else "BB") + "." + mac,
                    "completed_steps": [{"step_id": step, "result": {"date": "x"}}],
                },
            )
            forged = await client.call_tool(
                "resume_tool", {"saga_token": body + ".AAAA", "completed_steps": []}
            )
            other_step = await client.call_tool(
                "resume_tool", {"saga_token": token, "completed_steps": [{"step_id": "01OTHER"}]}
            )
            still = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
    for refused in (tampered, forged):
        assert refused.is_error and "not issued by this emceepee, or was altered" in texts(refused)[0]
    assert other_step.is_error and "is not a step of task" in texts(other_step)[0]
    assert [q["request_id"] for q in still] == [step]  # nothing was answered


async def test_the_park_policy_keeps_a_question_from_a_host_that_could_answer(
    tmp_path: Path, record: Path
) -> None:
    config = make_config(tmp_path, record, '[defaults]\nelicitation = "park"\n')
    asked: list[str] = []

    async def host_form(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Host"})

    async with Client(
        build_server(load_config(config)), mode="legacy", elicitation_callback=host_form
    ) as client:
        with anyio.fail_after(20):
            promoted = await ask(client)
            step = promoted["saga"]["steps"][0]["step_id"]
            await client.call_tool(
                "respond_to_elicitation",
                {"request_id": step, "action": "accept", "content": {"name": "Model"}},
            )
            result = await client.call_tool("get_task_result", {"task_id": promoted["proxy_task"]["task_id"]})
    assert asked == []
    assert texts(result) == ["hello Model"]


async def test_a_url_elicitation_shows_its_url_and_is_accepted_without_content(config: Path) -> None:
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            promoted = payload(
                await client.call_tool(
                    "execute_tool", {"server": "elicit", "tool": "ask_url", "args": {}, "timeout_ms": 30_000}
                )
            )
            [question] = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
            await client.call_tool(
                "respond_to_elicitation", {"request_id": question["request_id"], "action": "accept"}
            )
            result = await client.call_tool("get_task_result", {"task_id": promoted["proxy_task"]["task_id"]})
    assert question["url"] == "https://example.com/authorize?x=1" and "requested_schema" not in question
    assert texts(result) == ["accept"]


async def test_cancelling_the_call_withdraws_its_question(config: Path) -> None:
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            promoted = await ask(client)
            cancelled = payload(
                await client.call_tool("cancel_task", {"task_id": promoted["proxy_task"]["task_id"]})
            )
            left = payload(await client.call_tool("get_elicitations", {}))
            late = await client.call_tool(
                "respond_to_elicitation",
                {"request_id": promoted["saga"]["steps"][0]["step_id"], "action": "decline"},
            )
    assert cancelled["task"]["status"] == "cancelled"
    assert left == {"elicitations": []}
    [row] = Journal().pending.rows(status=None)
    assert row["status"] == "rejected"
    assert late.is_error and "already rejected" in texts(late)[0]
