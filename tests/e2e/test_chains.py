"""Results that suggest the next tool, followed by a real `emceepee serve` after every check a direct
call gets; allow/deny and approvals, answered from a terminal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
import pytest
from mcp import Client

from tests.person import approve_at_terminal
from tests.support import (
    example_table,
    hostile_table,
    payload,
    run_cli,
    serving,
    still_answering,
    texts,
    until_ready,
    write_config,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "chain.log"


def chain_config(tmp_path: Path, record: Path, **extra: Any) -> Path:
    table = example_table("chain", "chain.py", env={"EMCEEPEE_EXAMPLE_LOG": str(record)}, **extra)
    return write_config(tmp_path / "config.toml", table, hostile_table("hostile"))


def block(result: Any, key: str) -> Any:
    """The emceepee block `{key: …}` appended to a backend's result (None when absent)."""
    for text in texts(result):
        if text.startswith("{"):
            found = json.loads(text)
            if list(found) == [key]:
                return found[key]
    return None


def called(record: Path) -> list[str]:
    return [line.split(" ", 2)[1] for line in record.read_text().splitlines()] if record.exists() else []


async def call(client: Client, server: str, tool: str, args: dict[str, Any], **more: Any) -> Any:
    return await client.call_tool("execute_tool", {"server": server, "tool": tool, "args": args, **more})


async def started(client: Client) -> None:
    """As a host begins: the tool list, then the servers, until every one is ready."""
    await until_ready(client)


async def test_a_three_step_chain_returns_the_last_result_with_its_trace_and_keeps_every_step(
    tmp_path: Path, record: Path
) -> None:
    async with serving(chain_config(tmp_path, record)) as client:
        with anyio.fail_after(30):
            await started(client)
            done = await call(client, "chain", "step_a", {"value": "x"})
            earlier = block(done, "earlier_results")
            task = payload(await client.call_tool("get_task", {"task_id": earlier["task_id"]}))
    assert not done.is_error and texts(done)[0] == 'step_c got {"value": "x", "via": "step_b"}'
    trace = block(done, "tool_chain")
    assert [(s["step"], s["tool"], s["outcome"]) for s in trace["steps"]] == [
        (1, "step_a", "ok"),
        (2, "step_b", "ok"),
        (3, "step_c", "ok"),
    ]
    assert trace["steps"][1]["arguments"] == {"value": "x", "via": "step_a"} and "stopped" not in trace
    assert done.structured_content == {"step": "step_c", "arguments": {"value": "x", "via": "step_b"}}
    assert called(record) == ["step_a", "step_b", "step_c"]
    assert earlier["count"] == 2 and task["task"]["status"] == "completed"
    assert [s["result"]["content"][0]["text"][:6] for s in task["steps"]] == ["step_a", "step_b", "step_c"]


async def test_each_stop_returns_the_last_result_with_a_note_saying_why_and_what_was_suggested(
    tmp_path: Path, record: Path
) -> None:
    async with serving(chain_config(tmp_path, record)) as client:
        with anyio.fail_after(60):
            await started(client)
            depth = await call(client, "chain", "countdown", {"n": 7})
            cycle = await call(client, "chain", "cycle_x", {"n": 1})
            missing = await call(client, "chain", "missing_next", {})
            bad = await call(client, "chain", "bad_next", {})
            openai = await call(client, "chain", "openai_next", {"value": "o"})
            recovered = await call(client, "chain", "fail_next", {})
    stops = {
        name: block(result, "tool_chain")["stopped"]
        for name, result in (("depth", depth), ("cycle", cycle), ("missing", missing), ("bad", bad))
    }
    assert stops["depth"]["reason"] == "depth_limit" and "max_chain_depth = 5" in stops["depth"]["message"]
    assert stops["depth"]["suggested"] == {"tool": "countdown", "arguments": {"n": 2}}
    assert texts(depth)[0] == 'countdown got {"n": 3}'  # the 5th call's result, the first included
    assert stops["cycle"]["reason"] == "cycle" and "(step 1)" in stops["cycle"]["message"]
    assert stops["cycle"]["how"] == "execute_tool(server='chain', tool='cycle_x', args={\"n\":1})"
    assert stops["missing"]["reason"] == "unknown_tool" and "no_such_tool" in stops["missing"]["message"]
    assert "how" not in stops["missing"]
    assert stops["bad"]["reason"] == "invalid_arguments" and "via" in stops["bad"]["message"]
    assert texts(openai)[0] == 'step_c got {"value": "o", "via": "step_b"}'
    assert texts(recovered)[0] == 'step_c got {"value": "recovered", "via": "fail_next"}'
    assert called(record) == [
        *["countdown"] * 5,
        "cycle_x",
        "cycle_y",
        "missing_next",
        "bad_next",  # step_b never ran with the bad arguments
        *["openai_next", "step_b", "step_c"],
        *["fail_next", "step_c"],
    ]


async def test_with_follow_next_tool_off_the_suggestion_is_shown_for_the_model_to_make(
    tmp_path: Path, record: Path
) -> None:
    config = chain_config(tmp_path, record, follow_next_tool=False)
    async with serving(config) as client:
        with anyio.fail_after(30):
            await started(client)
            shown = await call(client, "chain", "step_a", {"value": "y"})
            followed = await call(
                client, "chain", "step_b", {"value": "y", "via": "a"}, follow_next_tool=True
            )
    stopped = block(shown, "tool_chain")["stopped"]
    assert stopped["reason"] == "not_followed"
    assert stopped["suggested"] == {"tool": "step_b", "arguments": {"value": "y", "via": "step_a"}}
    assert (
        stopped["how"] == 'execute_tool(server=\'chain\', tool=\'step_b\', args={"value":"y","via":"step_a"})'
    )
    assert texts(followed)[0].startswith("step_c got")
    assert called(record) == ["step_a", "step_b", "step_c"]


async def test_a_denied_tool_is_hidden_refused_and_never_reached_by_a_chain(
    tmp_path: Path, record: Path
) -> None:
    config = chain_config(tmp_path, record, tools={"deny": ["delete_*"]})
    async with serving(config) as client:
        with anyio.fail_after(30):
            await started(client)
            listed = payload(await client.call_tool("list_tools", {"server": "chain"}))
            refused = await call(client, "chain", "delete_draft", {"draft_id": "d"})
            chained = await call(client, "chain", "make_draft", {"title": "t"})
    names = [t["name"] for t in listed["servers"][0]["tools"]]
    assert "delete_draft" not in names and "make_draft" in names
    assert refused.is_error and refused.structured_content["error"]["type"] == "ToolDenied"
    assert "tools.deny = ['delete_*']" in texts(refused)[0] and "Nothing was sent" in texts(refused)[0]
    stopped = block(chained, "tool_chain")["stopped"]
    assert stopped["reason"] == "denied" and "how" not in stopped
    assert called(record) == ["make_draft"]


async def approval_step(client: Client) -> tuple[str, dict[str, Any]]:
    promoted = payload(await call(client, "chain", "make_draft", {"title": "t"}, timeout_ms=30_000))
    [step] = promoted["saga"]["steps"]
    return promoted["proxy_task"]["task_id"], step


async def test_a_destructive_step_waits_for_an_approval_given_from_a_terminal(
    tmp_path: Path, record: Path
) -> None:
    async with serving(chain_config(tmp_path, record, confirm_destructive=True)) as client:
        with anyio.fail_after(60):
            await started(client)
            task_id, step = await approval_step(client)
            ran_before = called(record)
            shown = await anyio.to_thread.run_sync(approve_at_terminal, step["step_id"])
            done = await client.call_tool("get_task_result", {"task_id": task_id})
    assert step["purpose"] == "approval" and step["approval"]["tool"] == "delete_draft"
    assert (
        step["approval"]["arguments"] == {"draft_id": "draft-t"}
        and "destructiveHint" in step["approval"]["reason"]
    )
    assert "Allow chain.delete_draft" in step["params"]["message"]
    assert ran_before == ["make_draft"]  # nothing destructive ran before the approval
    # the person saw the tool, its arguments and the reason before the question
    assert "Tool: chain.delete_draft" in shown and '"draft_id": "draft-t"' in shown
    assert "Reason: destructiveHint (confirm_destructive)" in shown
    assert texts(done)[0] == 'delete_draft got {"draft_id": "draft-t"}'
    assert called(record) == ["make_draft", "delete_draft"]


async def test_a_declined_approval_is_a_clear_result_and_the_tool_never_runs(
    tmp_path: Path, record: Path
) -> None:
    config = chain_config(tmp_path, record, confirm=["delete_*"])
    async with serving(config) as client:
        with anyio.fail_after(60):
            await started(client)
            task_id, step = await approval_step(client)
            declined = await anyio.to_thread.run_sync(lambda: run_cli("answer", step["step_id"], "--decline"))
            chained = await client.call_tool("get_task_result", {"task_id": task_id})
            direct = payload(
                await call(client, "chain", "delete_draft", {"draft_id": "d"}, timeout_ms=30_000)
            )
            [direct_step] = direct["saga"]["steps"]
            await client.call_tool(
                "respond_to_elicitation", {"request_id": direct_step["step_id"], "action": "decline"}
            )
            not_called = await client.call_tool(
                "get_task_result", {"task_id": direct["proxy_task"]["task_id"]}
            )
            task = payload(await client.call_tool("get_task", {"task_id": direct["proxy_task"]["task_id"]}))
    assert declined.returncode == 0, declined.stderr
    stopped = block(chained, "tool_chain")["stopped"]
    assert stopped["reason"] == "approval_declined" and "declined by cli" in stopped["message"]
    assert texts(chained)[0] == 'make_draft got {"title": "t"}'  # the last result that ran
    assert (
        not not_called.is_error
        and "was not called: its approval was declined (by model)" in texts(not_called)[0]
    )
    assert not_called.structured_content["called"] is False
    assert task["task"]["status"] == "completed"
    assert called(record) == ["make_draft"]


async def test_the_model_cannot_accept_its_own_approval_unless_approval_by_names_it(
    tmp_path: Path, record: Path
) -> None:
    async with serving(chain_config(tmp_path, record, confirm=["delete_*"])) as client:
        with anyio.fail_after(60):
            await started(client)
            task_id, step = await approval_step(client)
            accept = {"request_id": step["step_id"], "action": "accept"}
            refused = await client.call_tool("respond_to_elicitation", accept)
            still = payload(await client.call_tool("get_task", {"task_id": task_id}))
            ran_meanwhile = called(record)
            await anyio.to_thread.run_sync(approve_at_terminal, step["step_id"])
            done = await client.call_tool("get_task_result", {"task_id": task_id})
    assert step["approval"]["by"] == ["host", "cli"]
    assert refused.is_error and "not by the model. It is still pending." in texts(refused)[0]
    assert f"emceepee answer {step['step_id']}" in texts(refused)[0]
    assert still["task"]["status"] == "working" and ran_meanwhile == ["make_draft"]
    assert texts(done)[0] == 'delete_draft got {"draft_id": "draft-t"}'

    model_may = tmp_path / "model"
    model_may.mkdir()
    config = chain_config(model_may, record, confirm=["delete_*"], approval_by=["model"])
    async with serving(config) as client:
        with anyio.fail_after(60):
            await started(client)
            task_id, step = await approval_step(client)
            await client.call_tool(
                "respond_to_elicitation", {"request_id": step["step_id"], "action": "accept"}
            )
            done = await client.call_tool("get_task_result", {"task_id": task_id})
    assert texts(done)[0] == 'delete_draft got {"draft_id": "draft-t"}'


async def test_an_approval_reaches_the_host_only_if_approval_by_names_it(
    tmp_path: Path, record: Path
) -> None:
    asked: list[str] = []

    async def person(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={})

    async with serving(
        chain_config(tmp_path, record, confirm=["delete_*"]), elicitation_callback=person
    ) as c:
        with anyio.fail_after(60):
            await started(c)
            approved = await call(c, "chain", "make_draft", {"title": "t"}, timeout_ms=30_000)
    cli_only = tmp_path / "cli"
    cli_only.mkdir()
    config = chain_config(cli_only, record, confirm=["delete_*"], approval_by=["cli"])
    async with serving(config, elicitation_callback=person) as c:
        with anyio.fail_after(60):
            await started(c)
            _, step = await approval_step(c)
    assert len(asked) == 1 and asked[0].startswith("Allow chain.delete_draft")  # the first serve only
    assert texts(approved)[0] == 'delete_draft got {"draft_id": "draft-t"}'
    assert step["approval"]["by"] == ["cli"]


async def test_malformed_or_huge_suggestions_are_not_followed_and_serve_goes_on(
    tmp_path: Path, record: Path
) -> None:
    async with serving(chain_config(tmp_path, record)) as client:
        with anyio.fail_after(60):
            await started(client)
            results = {
                kind: await call(client, "hostile", "suggest", {"kind": kind})
                for kind in ("string", "no_tool", "huge")
            }
            await still_answering(client)
    for kind, result in results.items():
        stopped = block(result, "tool_chain")["stopped"]
        assert texts(result)[0] == "suggested", kind
        assert stopped["reason"] == "malformed_suggestion" and "how" not in stopped, kind
        assert len(stopped["message"]) < 1000, kind  # a huge suggestion is not repeated whole
