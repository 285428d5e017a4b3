"""A person answers a backend's question from another terminal while `serve` holds it."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from mcp import Client

from tests.support import (
    Terminal,
    example_table,
    payload,
    run_cli,
    serving,
    texts,
    write_config,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.toml", example_table("elicit", "elicit.py"))


@pytest.fixture
def sampling_config(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.toml", example_table("sampling", "sampling.py"))


async def question(client: Client, server: str, tool: str, args: dict[str, str]) -> tuple[str, str]:
    promoted = payload(
        await client.call_tool(
            "execute_tool", {"server": server, "tool": tool, "args": args, "timeout_ms": 30_000}
        )
    )
    return promoted["proxy_task"]["task_id"], promoted["saga"]["steps"][0]["step_id"]


async def test_emceepee_answer_json_reaches_the_backend_and_the_task_completes(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(30):
            task_id, request_id = await question(client, "elicit", "ask", {"question": "Name?"})
            listed = run_cli("pending")
            done = await anyio.to_thread.run_sync(
                lambda: run_cli("answer", request_id[:14], "--content", '{"name": "Cli"}')
            )
            result = await client.call_tool("get_task_result", {"task_id": task_id})
            left = payload(await client.call_tool("get_elicitations", {}))
    assert "Name?" in listed.stdout and request_id in listed.stdout
    assert done.returncode == 0, done.stderr
    assert texts(result) == ["hello Cli"]
    assert left == {"elicitations": []}


async def test_emceepee_answer_at_a_terminal_reaches_the_backend(config: Path) -> None:
    def answer_at_terminal(request_id: str) -> int:
        term = Terminal("answer", request_id)
        term.expect("Name (required)")
        term.expect("> ")
        term.type("Tty")
        for _ in range(2):  # age and colour are optional: skip both
            term.expect("Enter skips] > ")
            term.type("")
        term.expect("(accepted)")
        return term.finish()

    async with serving(config) as client:
        with anyio.fail_after(60):
            task_id, request_id = await question(client, "elicit", "ask", {"question": "Who?"})
            code = await anyio.to_thread.run_sync(answer_at_terminal, request_id)
            result = await client.call_tool("get_task_result", {"task_id": task_id})
    assert code == 0
    assert texts(result) == ["hello Tty"]


async def test_a_sampling_request_is_answered_from_the_cli(sampling_config: Path) -> None:
    async with serving(sampling_config) as client:
        with anyio.fail_after(30):
            task_id, request_id = await question(client, "sampling", "summarize", {"text": "the whole saga"})
            done = await anyio.to_thread.run_sync(
                lambda: run_cli("answer", request_id, "--text", "short saga")
            )
            result = await client.call_tool("get_task_result", {"task_id": task_id})
    assert done.returncode == 0, done.stderr
    assert texts(result) == ["summary: short saga"]
