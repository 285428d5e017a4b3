"""What list_tools shows a model over the real `serve`: each tool's title, hints, output schema and
task support as the backend listed them; with a pattern, only the servers that have a match."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.support import example_table, payload, serving, write_config

pytestmark = pytest.mark.anyio


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "config.toml",
        example_table("echo", "echo.py"),
        example_table("roots", "roots.py"),
        example_table("tasks", "tasks.py"),
    )


async def test_list_tools_keeps_hints_output_schemas_and_task_support(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_servers", {})
            listed = payload(await client.call_tool("list_tools", {}))
            found = payload(await client.call_tool("list_tools", {"pattern": "^research$|^add$"}))
    tools = {(g["server"], t["name"]): t for g in listed["servers"] for t in g["tools"]}
    assert tools[("echo", "add")]["output_schema"]["properties"] == {"sum": {"type": "number"}}
    assert tools[("roots", "list_roots")]["annotations"] == {"read_only_hint": True}
    assert tools[("tasks", "research")]["task_support"] == "required"
    assert tools[("tasks", "summarize")]["task_support"] == "optional"
    assert "task_support" not in tools[("tasks", "quick")] and "annotations" not in tools[("echo", "add")]
    assert [(g["server"], [t["name"] for t in g["tools"]]) for g in found["servers"]] == [
        ("echo", ["add"]),
        ("tasks", ["research"]),
    ]
