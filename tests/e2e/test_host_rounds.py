"""A 2026-07-28 host (the SDK `Client` in its default mode) answers a backend's questions in input
rounds of its own call, over the real `serve` process, after other calls: through its callbacks,
several rounds in a row, for the meta-tool and for a direct name, and for a backend of either era.
A round's `request_state` that is tampered with, another call's, used twice, expired or issued
before a restart is refused saying what to do; answers under keys the round did not ask, too big,
or of the wrong shape are refused, recording nothing. A host that does not come back, or whose
request cannot answer a kind, leaves the question parked and the call a task, as before."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from emceepee_cli import paths
from tests.support import (
    RawHost,
    example_table,
    modern_meta,
    payload,
    run_cli,
    serve_command,
    serving,
    texts,
    until_ready,
    write_config,
)

pytestmark = pytest.mark.anyio

FORM_ANSWERS: dict[str, Any] = {"date": "2026-08-01", "nights": 3, "confirm": True}
TRIP_ASKS = [
    "date",
    "llm",
    "nights",
    "llm",
    "confirm",
]  # what trip asks, in order (examples/servers/modern.py)


def make_config(tmp_path: Path, defaults: str = "") -> Path:
    """echo; `hand` asks its questions as requests (handshake era), `rounds` in its own rounds (2026)."""
    env = {"EMCEEPEE_EXAMPLE_LOG": str(tmp_path / "backend.log")}
    return write_config(
        tmp_path / "config.toml",
        f'[defaults]\nexpose = "both"\n{defaults}\n',
        example_table("echo", "echo.py"),
        example_table("hand", "modern.py", env=env),
        example_table("rounds", "modern.py", env=env, protocol="modern"),
    )


class Person:
    """The host's callbacks: a person filling each form, an LLM naming places; what each was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def form(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams), params
        key = next(iter(params.requested_schema["properties"]))
        self.asked.append(key)
        return types.ElicitResult(action="accept", content={key: FORM_ANSWERS[key]})

    async def llm(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.asked.append("llm")
        place = f"Place {len(self.asked)}"
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=place), model="host-llm"
        )


async def never(ctx: Any, params: Any) -> Any:
    """A callback the test drives by hand instead (it only makes the client declare the kind)."""
    raise AssertionError(f"the client answered {params!r} by itself")


def trip(server: str, city: str = "Oslo") -> dict[str, Any]:
    return {"server": server, "tool": "trip", "args": {"city": city}}


def answered_trip(city: str, first: int) -> str:
    """trip's result when Person answered it, its first question being Person's `first`-th."""
    return f"trip to {city} on 2026-08-01: 3 nights at Place {first + 1}, dinner at Place {first + 3}"


def backend_answers(tmp_path: Path) -> list[str]:
    return [
        json.loads(line.split(" ", 1)[1])["key"]
        for line in (tmp_path / "backend.log").read_text().splitlines()
    ]


async def test_a_2026_host_answers_three_forms_and_two_samplings_in_rounds_of_its_own_calls(
    tmp_path: Path,
) -> None:
    person = Person()
    async with serving(
        make_config(tmp_path), mode="auto", elicitation_callback=person.form, sampling_callback=person.llm
    ) as c:
        with anyio.fail_after(90):
            assert c.protocol_version == "2026-07-28"
            await until_ready(c, "echo", "hand", "rounds")
            echoed = await c.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "hi"}}
            )
            added = await c.call_tool("echo__add", {"a": 2, "b": 3})
            await c.call_tool("list_tasks", {})
            by_meta = [await c.call_tool("execute_tool", trip(server)) for server in ("hand", "rounds")]
            direct = [
                await c.call_tool(f"{server}__trip", {"city": "Bergen"}) for server in ("hand", "rounds")
            ]
            working = payload(await c.call_tool("list_tasks", {}))
            done = payload(await c.call_tool("list_tasks", {"include_completed": True}))
            await c.call_tool("list_servers", {})  # serve still answers (2026-07-28 has no ping)
    assert texts(echoed) == ["hi"] and texts(added) == ["5"]
    assert [texts(r) for r in by_meta] == [[answered_trip("Oslo", 1)], [answered_trip("Oslo", 6)]]
    assert [texts(r) for r in direct] == [[answered_trip("Bergen", 11)], [answered_trip("Bergen", 16)]]
    assert person.asked == TRIP_ASKS * 4  # every question reached the host, in order, none twice
    assert backend_answers(tmp_path) == ["date", "hotel", "nights", "dinner", "confirm"] * 4
    assert working == {"tasks": []}  # nothing was left parked
    trips = [t for t in done["tasks"] if t["tool"] == "trip"]  # each call was a task while it asked
    assert len(trips) == 4 and {t["status"] for t in trips} == {"completed"}
    with sqlite3.connect(paths.db_path()) as db:  # the journal kept each round the host answered
        rounds = [r for (r,) in db.execute("SELECT host_round FROM tasks WHERE tool = 'trip'")]
    assert rounds == [5, 5, 5, 5]


async def round_of(
    c: Client,
    args: dict[str, Any],
    request_state: str | None = None,
    input_responses: types.InputResponses | None = None,
) -> types.CallToolResult | types.InputRequiredResult:
    """One tools/call of execute_tool, driven by hand: an input round comes back as it is."""
    return await c.session.call_tool(
        "execute_tool",
        args,
        request_state=request_state,
        input_responses=input_responses,
        allow_input_required=True,
    )


def only_request(
    result: types.CallToolResult | types.InputRequiredResult,
) -> tuple[str, str, types.InputRequest]:
    """An input round of one question: its key, its state, the request."""
    assert isinstance(result, types.InputRequiredResult), result
    assert result.input_requests is not None and result.request_state is not None
    [(key, request)] = result.input_requests.items()
    return key, result.request_state, request


def refusal_text(result: types.CallToolResult | types.InputRequiredResult) -> str:
    assert isinstance(result, types.CallToolResult) and result.is_error, result
    return "\n".join(texts(result))


def date(value: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"date": value})


def completion(text: str) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text=text), model="by-hand")


async def test_a_round_state_tampered_foreign_or_replayed_and_wrong_answers_are_refused_recording_nothing(
    tmp_path: Path,
) -> None:
    async with serving(
        make_config(tmp_path), mode="auto", elicitation_callback=never, sampling_callback=never
    ) as c:
        with anyio.fail_after(90):
            await until_ready(c, "rounds")
            key, state, asked = only_request(await round_of(c, trip("rounds")))
            bergen_key, bergen_state, _ = only_request(await round_of(c, trip("rounds", "Bergen")))
            body, mac = state.split(".")[1:]
            tampered = f"emr1.{body[:-2]}{'A' if body[-2] != 'A' else 'B'}{body[-1]}.{mac}"
            refused = {
                "tampered": await round_of(
                    c, trip("rounds"), request_state=tampered, input_responses={key: date("d")}
                ),
                "foreign": await round_of(c, trip("rounds"), request_state=bergen_state, input_responses={}),
                "no_state": await round_of(c, trip("rounds"), input_responses={key: date("d")}),
                "wrong_key": await round_of(
                    c, trip("rounds"), request_state=state, input_responses={"X" * 500: date("d")}
                ),
                "huge": await round_of(
                    c,
                    trip("rounds"),
                    request_state=state,
                    input_responses={key: date("x" * (2 * 1024 * 1024))},
                ),
                "wrong_kind": await round_of(
                    c, trip("rounds"), request_state=state, input_responses={key: completion("d")}
                ),
                "schema": await round_of(
                    c, trip("rounds"), request_state=state, input_responses={key: date(5)}
                ),
            }
            pending = payload(await c.call_tool("get_elicitations", {"server": "rounds"}))["elicitations"]
            hotel_key, state2, hotel = only_request(
                await round_of(
                    c, trip("rounds"), request_state=state, input_responses={key: date("2026-09-09")}
                )
            )
            replayed = await round_of(
                c, trip("rounds"), request_state=state, input_responses={key: date("2026-09-09")}
            )
            nights_key, state3, _ = only_request(
                await round_of(
                    c, trip("rounds"), request_state=state2, input_responses={hotel_key: completion("Inn")}
                )
            )
            dinner_key, state4, _ = only_request(
                await round_of(
                    c,
                    trip("rounds"),
                    request_state=state3,
                    input_responses={nights_key: types.ElicitResult(action="accept", content={"nights": 2})},
                )
            )
            confirm_key, state5, _ = only_request(
                await round_of(
                    c, trip("rounds"), request_state=state4, input_responses={dinner_key: completion("Bar")}
                )
            )
            yes = types.ElicitResult(action="accept", content={"confirm": True})
            done = await round_of(c, trip("rounds"), request_state=state5, input_responses={confirm_key: yes})
            # The host never came back for Bergen: its question is parked, and the call goes on when
            # another answers it.
            await c.call_tool(
                "respond_to_elicitation",
                {"request_id": bergen_key, "action": "accept", "content": {"date": "2026-10-10"}},
            )
            bergen = payload(await c.call_tool("get_task_result", {"task_id": task_of(bergen_key)}))
            await c.call_tool("list_servers", {})  # serve still answers (2026-07-28 has no ping)
    assert isinstance(asked, types.ElicitRequest) and isinstance(hotel, types.CreateMessageRequest)
    expected = {
        "tampered": "This request_state was not issued by this emceepee, or was altered.",
        "foreign": "This request_state belongs to another call",
        "no_state": "input_responses came without the request_state",
        "wrong_key": f"input_responses has '{'X' * 80}', which is no question of this round "
        f"(its questions: {key})",
        "huge": f"input_responses['{key}'] is 2.0 MiB; elicitation answers may be at most 1 MiB",
        "wrong_kind": f"input_responses['{key}']: action must be accept, decline or cancel",
        "schema": f"input_responses['{key}']: The answer does not match the question's schema",
    }
    for name, start in expected.items():
        assert refusal_text(refused[name]).startswith(start), (name, refusal_text(refused[name]))
    assert [q["request_id"] for q in pending] == [key, bergen_key]  # nothing refused was recorded
    assert "was already answered; a request_state is used once" in refusal_text(replayed)
    assert "get_task_result" in refusal_text(replayed)
    assert isinstance(done, types.CallToolResult) and not done.is_error
    assert texts(done) == ["trip to Oslo on 2026-09-09: 2 nights at Inn, dinner at Bar"]
    assert [step["type"] for step in bergen["saga"]["steps"]] == ["sampling"]  # it went on: the hotel


def task_of(request_id: str) -> str:
    """The task a question was asked for, from the journal (its row names it)."""
    with sqlite3.connect(paths.db_path()) as db:
        (task_id,) = db.execute("SELECT task_id FROM pending WHERE request_id = ?", [request_id]).fetchone()
    return str(task_id)


async def answer_by_meta_tools(
    c: Client, task_id: str, forms: dict[str, Any], text: str
) -> tuple[list[str], Any]:
    """Answer the task's questions through the meta-tools, as a model would, until it ends: what was
    asked, and its result."""
    asked: list[str] = []
    while True:
        out = await c.call_tool("get_task_result", {"task_id": task_id})
        if out.structured_content is None or "saga" not in out.structured_content:
            return asked, out
        [step] = out.structured_content["saga"]["steps"]
        if step["type"] == "sampling":
            asked.append("llm")
            await c.call_tool("respond_to_sampling", {"request_id": step["step_id"], "content": text})
            continue
        key = next(iter(step["params"]["requestedSchema"]["properties"]))
        asked.append(key)
        answer = {"request_id": step["step_id"], "action": "accept", "content": {key: forms[key]}}
        await c.call_tool("respond_to_elicitation", answer)


async def test_an_expired_round_state_is_refused_naming_the_task(tmp_path: Path) -> None:
    config = make_config(tmp_path, "pending_timeout_ms = 1500")
    async with serving(config, mode="auto", elicitation_callback=never, sampling_callback=never) as c:
        with anyio.fail_after(60):
            await until_ready(c, "rounds")
            key, state, _ = only_request(await round_of(c, trip("rounds")))
            task_id = task_of(key)
            while payload(await c.call_tool("get_task", {"task_id": task_id}))["task"]["status"] == "working":
                await c.call_tool("await_activity", {"timeout_ms": 1000})  # until nobody answered in time
            late = await round_of(c, trip("rounds"), request_state=state, input_responses={key: date("d")})
    text = refusal_text(late)
    assert text.startswith(f"This request_state (task {task_id}) has expired"), text
    assert f"get_task_result(task_id='{task_id}')" in text


async def test_a_request_that_cannot_answer_a_kind_leaves_that_question_parked_and_the_call_a_task(
    tmp_path: Path,
) -> None:
    person = Person()
    config = make_config(tmp_path)
    async with serving(config, mode="auto", elicitation_callback=person.form) as c:  # forms only
        with anyio.fail_after(60):
            await until_ready(c, "hand")
            forms_only = payload(await c.call_tool("execute_tool", trip("hand")))
            await c.call_tool("cancel_task", {"task_id": forms_only["proxy_task"]["task_id"]})
    async with serving(config, mode="auto") as c:  # no callback at all
        with anyio.fail_after(60):
            await until_ready(c, "rounds")
            nothing = payload(await c.call_tool("rounds__trip", {"city": "Oslo"}))
            logs = payload(await c.call_tool("get_logs", {"server": "rounds"}))
            await c.call_tool("cancel_task", {"task_id": nothing["proxy_task"]["task_id"]})
    assert person.asked == ["date"]  # the form came inline; the sampling after it was parked
    assert [s["type"] for s in forms_only["saga"]["steps"]] == ["sampling"]
    assert [s["type"] for s in nothing["saga"]["steps"]] == ["elicitation"]
    assert any("the host speaks MCP 2026-07-28" in entry["message"] for entry in logs["logs"]), logs


async def test_a_call_between_two_rounds_survives_kill_9_and_an_old_state_is_refused_after_restart(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path)
    process = await anyio.open_process(serve_command(config), env={**os.environ})
    try:
        host = RawHost(process, modern_meta({}))  # its first requests declare nothing
        with anyio.fail_after(60):
            while "tools" not in (await host.tool("list_tools", {"server": "rounds"}))["servers"][0]:
                pass
            parked = await host.tool("rounds__trip", {"city": "Tromsø"})
            host.meta = modern_meta(
                {"elicitation": {"form": {}}, "sampling": {}}
            )  # each request says its own
            first = await host.send("tools/call", {"name": "rounds__trip", "arguments": {"city": "Oslo"}})
            [date_key] = first["inputRequests"]
            answer = {"action": "accept", "content": {"date": "2026-12-24"}}
            second = await host.send(
                "tools/call",
                {
                    "name": "rounds__trip",
                    "arguments": {"city": "Oslo"},
                    "requestState": first["requestState"],
                    "inputResponses": {date_key: answer},
                },
            )
        process.kill()
        with anyio.fail_after(10):
            await process.wait()
    finally:
        await process.aclose()
    [hotel_key] = second["inputRequests"]
    task_id = task_of(hotel_key)
    async with serving(config, mode="auto", elicitation_callback=never, sampling_callback=never) as c:
        with anyio.fail_after(60):
            await until_ready(c, "rounds")  # its direct names are listed once it is up
            stale = await c.session.call_tool(
                "rounds__trip",
                {"city": "Oslo"},
                request_state=second["requestState"],
                input_responses={hotel_key: completion("Inn")},
                allow_input_required=True,
            )
            adopted = payload(await c.call_tool("get_task", {"task_id": task_id}))
            by_cli = await anyio.to_thread.run_sync(
                lambda: run_cli("answer", hotel_key, "--text", "Hotel Bristol")
            )
            steps, done = await answer_by_meta_tools(c, task_id, {"nights": 2, "confirm": True}, "Fjord Bar")
    assert [s["type"] for s in parked["saga"]["steps"]] == ["elicitation"]  # a task, as without rounds
    text = refusal_text(stale)
    assert text.startswith(f"This request_state (task {task_id}) was issued by another emceepee process"), (
        text
    )
    assert "respond_to_elicitation / respond_to_sampling (or `emceepee answer`" in text
    assert adopted["task"]["status"] == "working"
    assert [s["step_id"] for s in adopted["saga"]["steps"]] == [hotel_key]
    assert by_cli.returncode == 0, by_cli.stderr
    assert steps == ["nights", "llm", "confirm"]
    assert texts(done) == ["trip to Oslo on 2026-12-24: 2 nights at Hotel Bristol, dinner at Fjord Bar"]
