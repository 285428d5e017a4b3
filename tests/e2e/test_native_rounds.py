"""A backend that asks questions while it answers a host's `prompts/get` or `resources/read`, over the
real `serve` process, after other calls: a 2026-07-28 host (the SDK `Client` in its default mode)
answers them in input rounds of that very request, through its callbacks, for a backend of either
era (tests/backends/asking_native.py: two questions each); a handshake-era host gets a 2026-07-28
backend's questions forwarded. A round's `request_state` that is
tampered with, another request's, used twice, expired or from before a restart is refused (-32602)
saying what to do; wrong answers are refused recording nothing. A host that does not come back
leaves the questions parked and answerable, and the request's round expires with them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.support import ROOT, example_table, payload, refusal, serving, texts, until_ready, write_config

pytestmark = pytest.mark.anyio

BACKEND = ROOT / "tests" / "backends" / "asking_native.py"


def asking_table(name: str, **extra: Any) -> str:
    """A [servers.NAME] table running tests/backends/asking_native.py, its resource NAME://profile."""
    lines = [
        f"[servers.{name}]",
        f"command = {json.dumps(sys.executable)}",
        f"args = {json.dumps([str(BACKEND), name])}",
        *(f"{key} = {json.dumps(value)}" for key, value in extra.items()),
    ]
    return "\n".join(lines) + "\n"


def make_config(tmp_path: Path, defaults: str = "") -> Path:
    """echo; `hand` asks by requests (handshake era), `rounds` in rounds of its own (2026-07-28)."""
    return write_config(
        tmp_path / "config.toml",
        f"[defaults]\n{defaults}\n",
        example_table("echo", "echo.py"),
        asking_table("hand"),
        asking_table("rounds", protocol="modern"),
    )


class Person:
    """The host's callbacks: a person filling each form, an LLM answering; what each was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def form(self, ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams), params
        self.asked.append(params.message)
        key = next(iter(params.requested_schema["properties"]))
        return types.ElicitResult(action="accept", content={key: f"{key}-{len(self.asked)}"})

    async def llm(self, ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        [message] = params.messages
        assert isinstance(message.content, types.TextContent)
        self.asked.append(message.content.text)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(text=f"llm-{len(self.asked)}"), model="host-llm"
        )


async def never(ctx: Any, params: Any) -> Any:
    """A callback the test drives by hand instead (it only makes the client declare the kind)."""
    raise AssertionError(f"the client answered {params!r} by itself")


def prompt_text(result: types.GetPromptResult) -> str:
    [message] = result.messages
    assert isinstance(message.content, types.TextContent)
    return message.content.text


def resource_text(result: types.ReadResourceResult) -> str:
    [content] = result.contents
    assert isinstance(content, types.TextResourceContents)
    return content.text


async def test_a_2026_host_answers_a_prompts_and_a_resources_questions_in_rounds_of_its_request(
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
            summed = await c.call_tool(
                "execute_tool", {"server": "hand", "tool": "get_sum", "args": {"a": 2}}
            )
            prompts = await c.list_prompts()
            resources = await c.list_resources()
            plans = [await c.get_prompt(f"{server}__plan", {"city": "Oslo"}) for server in ("hand", "rounds")]
            profiles = [await c.read_resource(f"{server}://profile") for server in ("hand", "rounds")]
            pending = payload(await c.call_tool("get_elicitations", {}))
            await c.call_tool("list_servers", {})  # serve still answers
    assert texts(echoed) == ["hi"] and texts(summed) == ["2"]
    assert {"hand__plan", "rounds__plan"} <= {p.name for p in prompts.prompts}
    assert {"hand://profile", "rounds://profile"} <= {str(r.uri) for r in resources.resources}
    assert [prompt_text(p) for p in plans] == [
        "plan: Oslo on date-1 at llm-2",
        "plan: Oslo on date-3 at llm-4",
    ]
    assert [resource_text(r) for r in profiles] == ["profile of name-5: llm-6", "profile of name-7: llm-8"]
    expected = ["Date in Oslo?", "Hotel in Oslo on date-1?", "Date in Oslo?", "Hotel in Oslo on date-3?"]
    expected += ["Your name?", "Greet name-5", "Your name?", "Greet name-7"]
    assert person.asked == expected  # every question reached the host, in order, none twice
    assert pending["elicitations"] == []  # nothing was left parked


async def test_a_handshake_era_host_gets_a_2026_backends_questions_forwarded(tmp_path: Path) -> None:
    person = Person()
    async with serving(
        make_config(tmp_path), elicitation_callback=person.form, sampling_callback=person.llm
    ) as c:
        with anyio.fail_after(60):
            await until_ready(c, "rounds")
            await c.call_tool("execute_tool", {"server": "rounds", "tool": "get_sum", "args": {"a": 4}})
            plan = await c.get_prompt("rounds__plan", {"city": "Rome"})
            profile = await c.read_resource("rounds://profile")
    assert prompt_text(plan) == "plan: Rome on date-1 at llm-2"
    assert resource_text(profile) == "profile of name-3: llm-4"


async def prompt_round(
    c: Client,
    city: str = "Oslo",
    request_state: str | None = None,
    input_responses: types.InputResponses | None = None,
    server: str = "rounds",
) -> types.GetPromptResult | types.InputRequiredResult:
    """One prompts/get, driven by hand: an input round comes back as it is."""
    return await c.session.get_prompt(
        f"{server}__plan",
        {"city": city},
        request_state=request_state,
        input_responses=input_responses,
        allow_input_required=True,
    )


def only_request(result: object) -> tuple[str, str, types.InputRequest]:
    """An input round of one question: its key, its state, the request."""
    assert isinstance(result, types.InputRequiredResult), result
    assert result.input_requests is not None and result.request_state is not None
    [(key, request)] = result.input_requests.items()
    return key, result.request_state, request


def date(value: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"date": value})


def completion(text: str) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(text=text), model="by-hand")


@pytest.mark.parametrize("server", ["rounds", "hand"])
async def test_hostile_retries_of_a_prompts_round_are_refused_recording_nothing(
    tmp_path: Path, server: str
) -> None:
    async with serving(
        make_config(tmp_path), mode="auto", elicitation_callback=never, sampling_callback=never
    ) as c:
        with anyio.fail_after(90):
            await until_ready(c, server, "rounds")
            await c.call_tool("execute_tool", {"server": server, "tool": "get_sum", "args": {"a": 1}})
            key, state, asked = only_request(await prompt_round(c, server=server))
            # from the 2026-07-28 backend: a handshake-era one's question is tied to a held request only
            # when it is the one request in flight there (session/native_rounds.py)
            read = await c.session.read_resource("rounds://profile", allow_input_required=True)
            profile_key, profile_state, _ = only_request(read)
            body, mac = state.split(".")[1:]
            tampered = f"emn1.{body[:-2]}{'A' if body[-2] != 'A' else 'B'}{body[-1]}.{mac}"
            answer: types.InputResponses = {key: date("2026-09-09")}
            refused = {
                "tampered": await refusal(prompt_round(c, "Oslo", tampered, answer, server)),
                "tool_state": await refusal(prompt_round(c, "Oslo", "emr1.e30.x", answer, server)),
                "foreign": await refusal(prompt_round(c, "Oslo", profile_state, {}, server)),
                "other_city": await refusal(prompt_round(c, "Bergen", state, answer, server)),
                "no_state": await refusal(prompt_round(c, "Oslo", None, answer, server)),
                "wrong_key": await refusal(prompt_round(c, "Oslo", state, {"X" * 500: date("d")}, server)),
                "wrong_kind": await refusal(prompt_round(c, "Oslo", state, {key: completion("d")}, server)),
                "schema": await refusal(prompt_round(c, "Oslo", state, {key: date(5)}, server)),
            }
            pending = payload(await c.call_tool("get_elicitations", {}))["elicitations"]
            hotel_key, state2, hotel = only_request(await prompt_round(c, "Oslo", state, answer, server))
            replayed = await refusal(prompt_round(c, "Oslo", state, answer, server))
            done = await prompt_round(c, "Oslo", state2, {hotel_key: completion("Inn")}, server)
            gone = await refusal(prompt_round(c, "Oslo", state2, {hotel_key: completion("Inn")}, server))
            # The host never came back for the profile: its question is parked, answerable as any.
            await c.call_tool(
                "respond_to_elicitation",
                {"request_id": profile_key, "action": "accept", "content": {"name": "Ada"}},
            )
            await c.call_tool("list_servers", {})
    assert isinstance(asked, types.ElicitRequest) and isinstance(hotel, types.CreateMessageRequest)
    expected = {
        "tampered": "This request_state was not issued by this emceepee, or was altered.",
        "tool_state": "This request_state was not issued by this emceepee, or was altered.",
        "foreign": "This request_state belongs to another request (a resources/read), not to this "
        "prompts/get",
        "other_city": "This request_state belongs to another request (a prompts/get)",
        "no_state": "input_responses came without the request_state",
        "wrong_key": f"input_responses has '{'X' * 80}', which is no question of this round "
        f"(its questions: {key})",
        "wrong_kind": f"input_responses['{key}']: action must be accept, decline or cancel",
        "schema": f"input_responses['{key}']: The answer does not match the question's schema",
    }
    for name, start in expected.items():
        assert refused[name].code == types.INVALID_PARAMS, (name, refused[name])
        assert refused[name].message.startswith(start), (name, refused[name].message)
    assert [q["request_id"] for q in pending] == [key, profile_key]  # nothing refused was recorded
    assert "was already answered; a request_state is used once" in replayed.message
    assert isinstance(done, types.GetPromptResult) and prompt_text(done) == "plan: Oslo on 2026-09-09 at Inn"
    assert "has ended" in gone.message and "Send the prompts/get again" in gone.message


async def test_a_host_that_never_comes_back_leaves_the_questions_parked_until_they_expire(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path, "pending_timeout_ms = 1500")
    async with serving(config, mode="auto", elicitation_callback=never, sampling_callback=never) as c:
        with anyio.fail_after(60):
            await until_ready(c, "rounds", "hand")
            rounds_key, rounds_state, _ = only_request(await prompt_round(c))
            hand_key, _, _ = only_request(await prompt_round(c, server="hand"))
            parked = payload(await c.call_tool("get_elicitations", {}))["elicitations"]
            while payload(await c.call_tool("get_elicitations", {}))["elicitations"]:
                await c.call_tool("await_activity", {"timeout_ms": 1000})  # until nobody answered in time
            late = await refusal(prompt_round(c, "Oslo", rounds_state, {rounds_key: date("d")}))
            again = only_request(await prompt_round(c))  # a new request asks anew
            summed = await c.call_tool(
                "execute_tool", {"server": "hand", "tool": "get_sum", "args": {"a": 3}}
            )
    assert {q["request_id"] for q in parked} == {rounds_key, hand_key}
    assert late.code == types.INVALID_PARAMS and "has expired" in late.message, late
    assert again[0] not in (rounds_key, hand_key)
    assert texts(summed) == ["3"]


async def test_a_round_state_from_before_a_restart_is_refused_saying_to_send_the_request_again(
    tmp_path: Path,
) -> None:
    config = make_config(tmp_path)
    async with serving(config, mode="auto", elicitation_callback=never, sampling_callback=never) as c:
        with anyio.fail_after(60):
            await until_ready(c, "rounds")
            key, state, _ = only_request(await prompt_round(c))
    async with serving(config, mode="auto", elicitation_callback=never, sampling_callback=never) as c:
        with anyio.fail_after(60):
            await until_ready(c, "rounds")
            stale = await refusal(prompt_round(c, "Oslo", state, {key: date("d")}))
    assert stale.code == types.INVALID_PARAMS
    assert "was issued by another emceepee process" in stale.message, stale.message
    assert "Send the prompts/get again without request_state" in stale.message
