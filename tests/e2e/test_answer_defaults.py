"""Answering a form: the schema's defaults (SEP-1034) fill what an accept leaves out, whoever
answers (the model, a saga's resume, a person at the CLI); a value given is checked, a URI included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from tests.support import example_table, payload, run_cli, serving, texts, write_config

pytestmark = pytest.mark.anyio

DEFAULTS = {
    "name": "Ada Lovelace",
    "homepage": "https://example.com/ada",
    "age": 36,
    "score": 9.5,
    "subscribed": True,
    "plan": "pro",
    "color": "#00FF00",
    "topics": ["news"],
}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.toml", example_table("defaults", "defaults.py"))


async def parked(client: Client) -> tuple[str, str, str]:
    """Call defaults.profile; its task, question and saga token once the question is parked."""
    await client.call_tool("list_servers", {})
    await client.call_tool("list_tools", {})
    promoted = payload(
        await client.call_tool(
            "execute_tool", {"server": "defaults", "tool": "profile", "args": {}, "timeout_ms": 20_000}
        )
    )
    saga = promoted["saga"]
    return promoted["proxy_task"]["task_id"], saga["steps"][0]["step_id"], saga["saga_token"]


def result_json(result: Any) -> dict[str, Any]:
    assert not result.is_error, texts(result)
    out: dict[str, Any] = json.loads(texts(result)[0])
    return out


async def test_respond_to_elicitation_with_empty_content_sends_the_defaults(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(60):
            task_id, step, _ = await parked(client)
            answered = payload(
                await client.call_tool(
                    "respond_to_elicitation", {"request_id": step, "action": "accept", "content": {}}
                )
            )
            result = await client.call_tool("get_task_result", {"task_id": task_id})
    assert result_json(result) == DEFAULTS
    assert answered["answered"]["status"] == "accepted"


async def test_resume_tool_fills_what_the_model_left_out(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(60):
            _, step, token = await parked(client)
            result = await client.call_tool(
                "resume_tool",
                {"saga_token": token, "completed_steps": [{"step_id": step, "result": {"name": "Grace"}}]},
            )
    assert result_json(result) == DEFAULTS | {"name": "Grace"}


async def test_emceepee_answer_json_applies_the_defaults(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(60):
            task_id, step, _ = await parked(client)
            done = await anyio.to_thread.run_sync(lambda: run_cli("answer", step, "--content", '{"age": 40}'))
            result = await client.call_tool("get_task_result", {"task_id": task_id})
    assert done.returncode == 0, done.stderr
    assert result_json(result) == DEFAULTS | {"age": 40}


async def test_a_value_that_is_not_a_uri_is_refused_and_the_question_stays(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(60):
            task_id, step, _ = await parked(client)
            wrong = await client.call_tool(
                "respond_to_elicitation",
                {"request_id": step, "action": "accept", "content": {"homepage": "not a uri"}},
            )
            still = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
            await client.call_tool("cancel_task", {"task_id": task_id})
    assert wrong.is_error
    assert "content.homepage: \"not a uri\" is not a valid 'uri'" in texts(wrong)[0]
    assert [q["request_id"] for q in still] == [step]
