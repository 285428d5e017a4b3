"""The meta-tools, driven in memory through the SDK's client, with real subprocess backends."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest

from emceepee_cli.config import load_config
from tests.support import (
    Gate,
    emceepee,
    example_table,
    hostile_table,
    payload,
    text_of,
    texts,
    until_ready,
    write_config,
)

pytestmark = pytest.mark.anyio

ALLOW_CHANGES = '[defaults]\nmodel_adds_servers = "allow"\n'


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "backend.log"


def make_config(tmp_path: Path, record: Path, *names: str, stdlib: tuple[str, ...] = ()) -> Path:
    """A config with only the named backends (each SDK backend costs a second of CPU to start);
    those in `stdlib` are the stdlib hostile backend under that name, where only the name matters."""
    tables = {
        "echo": example_table("echo", "echo.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}),
        "many": example_table("many", "many_tools.py"),
        "crashy": example_table("crashy", "crashy.py"),
        "ghost": '[servers.ghost]\ncommand = "emceepee-test-no-such-command"\n',
    }
    chosen = [hostile_table(name) if name in stdlib else tables[name] for name in names]
    return write_config(tmp_path / "config.toml", *chosen)


@pytest.fixture
def echo_config(tmp_path: Path, record: Path) -> Path:
    return make_config(tmp_path, record, "echo")


@pytest.fixture
def crashy_config(tmp_path: Path, record: Path) -> Path:
    return make_config(tmp_path, record, "crashy")


async def test_the_host_sees_the_fixed_meta_tools(echo_config: Path) -> None:
    async with emceepee(echo_config) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert names == {
        "list_servers",
        "add_server",
        "remove_server",
        "list_tools",
        "execute_tool",
        "list_resources",
        "read_resource",
        "list_prompts",
        "get_prompt",
        "get_notifications",
        "get_logs",
        "get_elicitations",
        "respond_to_elicitation",
        "get_sampling_requests",
        "respond_to_sampling",
        "list_tasks",
        "get_task",
        "get_task_result",
        "cancel_task",
        "await_activity",
        "resume_tool",
    }


async def test_list_servers_shows_ready_backends_and_a_missing_command_as_failed(
    tmp_path: Path, record: Path
) -> None:
    config = make_config(tmp_path, record, "echo", "many", "ghost")
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            await client.call_tool("list_tools", {})  # waits (bounded) for backends still starting
            servers = {
                row["name"]: row for row in payload(await client.call_tool("list_servers", {}))["servers"]
            }
    assert servers["echo"]["status"] == "ready" and servers["echo"]["pid"] > 0
    assert servers["many"]["tools"] == 40
    assert servers["ghost"]["status"] == "failed"
    assert "emceepee-test-no-such-command" in servers["ghost"]["last_error"]
    assert "not found" in servers["ghost"]["last_error"]


async def test_execute_tool_passes_the_backend_result_through_unchanged(tmp_path: Path, record: Path) -> None:
    config = make_config(tmp_path, record, "echo", "many")
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            echoed = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "hé"}}
            )
            added = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "add", "args": {"a": 2, "b": 3.5}}
            )
            failed = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "fail", "args": {"message": "nope"}}
            )
            tenth = await client.call_tool(
                "execute_tool", {"server": "many", "tool": "tool_30", "args": {"n": 7}}
            )
    assert texts(echoed) == ["hé"] and not echoed.is_error
    assert added.structured_content == {"sum": 5.5}
    assert failed.is_error and texts(failed) == ["nope"]
    assert texts(tenth) == ["tool_30 got 7"]


async def test_invalid_args_are_refused_with_the_field_named_and_never_sent(
    echo_config: Path, record: Path
) -> None:
    async with emceepee(echo_config) as client:
        with anyio.fail_after(20):
            result = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "slow", "args": {"seconds": "x"}}
            )
    assert result.is_error
    assert "args.seconds" in texts(result)[0] and "not of type 'number'" in texts(result)[0]
    assert "started slow" not in (record.read_text() if record.exists() else "")


async def test_unknown_names_get_errors_that_list_the_choices(tmp_path: Path, record: Path) -> None:
    # only echo's tools matter here; the others need only their names
    config = make_config(tmp_path, record, "echo", "many", "crashy", "ghost", stdlib=("many", "crashy"))
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            no_server = await client.call_tool("execute_tool", {"server": "gh", "tool": "x"})
            no_tool = await client.call_tool("execute_tool", {"server": "echo", "tool": "ecko"})
            no_meta = await client.call_tool("run", {})
            bad_meta_args = await client.call_tool("execute_tool", {"server": "echo"})
    assert no_server.is_error and "Known: crashy, echo, ghost, many" in texts(no_server)[0]
    assert no_tool.is_error and "Did you mean: echo" in texts(no_tool)[0]
    assert no_meta.is_error and "execute_tool" in texts(no_meta)[0]
    assert bad_meta_args.is_error and "'tool' is a required property" in texts(bad_meta_args)[0]


async def test_resources_templates_and_prompts_pass_through(tmp_path: Path, record: Path) -> None:
    config = make_config(tmp_path, record, "echo", "many")
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            listing = payload(await client.call_tool("list_resources", {"server": "echo"}))
            readme = await client.call_tool("read_resource", {"server": "echo", "uri": "echo://readme"})
            item = await client.call_tool("read_resource", {"server": "echo", "uri": "echo://items/42"})
            prompt = payload(
                await client.call_tool(
                    "get_prompt", {"server": "echo", "name": "greet", "arguments": {"name": "Ada"}}
                )
            )
            prompts = payload(await client.call_tool("list_prompts", {"server": "many"}))
    group = listing["servers"][0]
    assert [r["uri"] for r in group["resources"]] == ["echo://readme"]
    assert [t["uri_template"] for t in group["resource_templates"]] == ["echo://items/{item_id}"]
    assert isinstance(readme.content[0], types.EmbeddedResource)
    assert "echo example backend" in text_of(readme.content[0])
    assert text_of(item.content[0]) == "item 42"
    assert "Ada" in prompt["messages"][0]["content"]["text"]
    assert len(prompts["servers"][0]["prompts"]) == 7  # walked across two pages


async def test_a_backend_crashing_mid_call_fails_fast_then_is_restarted(crashy_config: Path) -> None:
    async with emceepee(crashy_config) as client:
        with anyio.fail_after(20):
            await client.call_tool("execute_tool", {"server": "crashy", "tool": "ok"})
        with anyio.fail_after(2):
            crashed = await client.call_tool(
                "execute_tool", {"server": "crashy", "tool": "crash", "args": {"after_ms": 100}}
            )
        with anyio.fail_after(20):
            after = await client.call_tool("execute_tool", {"server": "crashy", "tool": "ok"})
            servers = {r["name"]: r for r in payload(await client.call_tool("list_servers", {}))["servers"]}
    assert crashed.is_error
    assert "exited during tools/call 'crash'" in texts(crashed)[0]
    assert "exit code 3" in texts(crashed)[0] and "about to crash" in texts(crashed)[0]
    assert texts(after) == ["ok"]
    assert servers["crashy"]["restarts"] == 1 and servers["crashy"]["status"] == "ready"


async def test_garbage_on_a_backends_stdout_is_logged_and_the_backend_keeps_working(
    crashy_config: Path,
) -> None:
    async with emceepee(crashy_config) as client:
        with anyio.fail_after(20):
            survived = await client.call_tool("execute_tool", {"server": "crashy", "tool": "garbage"})
            logs = payload(await client.call_tool("get_logs", {"server": "crashy", "level": "error"}))["logs"]
    assert texts(survived) == ["survived"]
    assert any("not JSON-RPC" in entry["message"] for entry in logs)


async def test_a_new_tool_announced_by_list_changed_can_be_called(echo_config: Path) -> None:
    async with emceepee(echo_config) as client:
        with anyio.fail_after(20):
            await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "add_tool", "args": {"name": "zeta"}}
            )
            zeta = await client.call_tool("execute_tool", {"server": "echo", "tool": "zeta", "args": {}})
            found = payload(await client.call_tool("list_tools", {"server": "echo", "pattern": "^ZETA$"}))
            notes = payload(await client.call_tool("get_notifications", {"server": "echo"}))["notifications"]
    assert not zeta.is_error and texts(zeta) == ["zeta"]
    assert [t["name"] for t in found["servers"][0]["tools"]] == ["zeta"]
    assert "notifications/tools/list_changed" in [n["method"] for n in notes]


async def test_backend_logs_and_stderr_are_kept_for_get_logs(tmp_path: Path, record: Path) -> None:
    config = make_config(tmp_path, record, "echo", "crashy")
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "log me"}}
            )
            await client.call_tool("execute_tool", {"server": "crashy", "tool": "crash"})
            echo_logs = payload(await client.call_tool("get_logs", {"server": "echo", "level": "info"}))[
                "logs"
            ]
            crashy_logs = payload(await client.call_tool("get_logs", {"server": "crashy"}))["logs"]
    assert any(e["source"] == "mcp" and "log me" in e["message"] for e in echo_logs)
    assert any(e["source"] == "stderr" and "about to crash" in e["message"] for e in crashy_logs)


async def test_progress_from_the_backend_is_relayed_to_the_host(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("h"))
    gate = Gate(tmp_path / "gate")
    seen: list[float] = []
    heard, hear = anyio.create_memory_object_stream[float](10)
    results: list[types.CallToolResult] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        await heard.send(progress)

    async def call() -> None:
        results.append(
            await client.call_tool(
                "execute_tool",
                {"server": "h", "tool": "stepped", "args": {"file": str(gate.path), "steps": 4}},
                progress_callback=on_progress,
            )
        )

    async with emceepee(config) as client, heard, hear:
        with anyio.fail_after(20):
            await until_ready(client, "h")
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                for step in range(1, 5):  # each step's progress reaches the host before the next is sent
                    assert await hear.receive() == step
                    gate.open(step)
    [result] = results
    assert not result.is_error and texts(result) == ["stepped"]
    assert seen == [1, 2, 3, 4]


async def test_add_server_starts_and_saves_it_and_remove_server_undoes_both(
    tmp_path: Path, record: Path
) -> None:
    import sys

    from tests.support import EXAMPLES

    # the added one is an SDK backend; the user lets the model add servers without asking
    config = write_config(tmp_path / "config.toml", ALLOW_CHANGES, hostile_table("echo"))

    async with emceepee(config) as client:
        with anyio.fail_after(30):
            added = payload(
                await client.call_tool(
                    "add_server",
                    {"name": "echo2", "command": sys.executable, "args": [str(EXAMPLES / "echo.py")]},
                )
            )
            called = await client.call_tool(
                "execute_tool", {"server": "echo2", "tool": "echo", "args": {"text": "2"}}
            )
            saved = load_config(config).servers
            removed = payload(await client.call_tool("remove_server", {"name": "echo2"}))
            gone = await client.call_tool(
                "execute_tool", {"server": "echo2", "tool": "echo", "args": {"text": "2"}}
            )
    assert added["status"] == "ready" and added["persisted"] is True
    assert texts(called) == ["2"]
    assert saved["echo2"].args == (str(EXAMPLES / "echo.py"),)
    assert removed == {"removed": "echo2", "status": "stopped", "removed_from_config": True}
    assert "echo2" not in load_config(config).servers
    assert gone.is_error and "Unknown server 'echo2'" in texts(gone)[0]


async def test_add_server_refuses_a_name_that_exists_and_bad_shapes(tmp_path: Path, record: Path) -> None:
    config = make_config(tmp_path, record, "echo", stdlib=("echo",))  # only its name is needed
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            twice = await client.call_tool("add_server", {"name": "echo", "command": "x"})
            neither = await client.call_tool("add_server", {"name": "new"})
            bad_name = await client.call_tool("add_server", {"name": "../etc", "command": "x"})
    assert twice.is_error and "already exists" in texts(twice)[0]
    assert neither.is_error and "exactly one of `command`" in texts(neither)[0]
    assert bad_name.is_error and "arguments.name" in texts(bad_name)[0]


async def test_a_broken_server_table_is_reported_and_the_rest_still_load(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        hostile_table("echo"),  # any backend that answers echo shows the rest loaded
        '[servers.typo]\ncomand = "x"\n',
    )
    async with emceepee(config) as client:
        with anyio.fail_after(20):
            ok = await client.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "fine"}}
            )
            servers = {r["name"]: r for r in payload(await client.call_tool("list_servers", {}))["servers"]}
            typo = await client.call_tool("execute_tool", {"server": "typo", "tool": "x"})
    assert texts(ok) == ["fine"]
    assert servers["typo"]["status"] == "failed" and "command" in servers["typo"]["last_error"]
    assert typo.is_error and "could not load" in texts(typo)[0]


async def test_a_backend_that_keeps_failing_to_start_is_failed_after_its_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from emceepee_cli.backends import backend

    monkeypatch.setattr(backend, "RESTART_BACKOFF_S", (0.01, 0.02, 0.03))  # the test switch: no real backoff
    config = write_config(
        tmp_path / "config.toml", example_table("crashy", "crashy.py", env={"CRASHY_FAIL_AT_START": "1"})
    )
    async with emceepee(config) as client:
        with anyio.fail_after(30):
            while True:
                events = payload(await client.call_tool("await_activity", {"timeout_ms": 5000}))["events"]
                if any(e["type"] == "server_failed" for e in events):
                    break
            [row] = payload(await client.call_tool("list_servers", {}))["servers"]
            call = await client.call_tool("execute_tool", {"server": "crashy", "tool": "ok"})
    assert row["status"] == "failed" and row["restarts"] == 3
    assert "refusing to start" in row["last_error"] and "exit code 2" in row["last_error"]
    assert call.is_error and "is failed" in texts(call)[0] and "get_logs" in texts(call)[0]
