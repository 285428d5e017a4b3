"""A 2026-07-28 host's roots over the real `serve`, with the SDK `Client` in its default mode: its
first tool call that declares `roots` (meta-tool or direct name) is answered by a round asking only
the roots, once per host, not per call; its answer is what backends of either era are answered
(one told before is sent list_changed). A host without a roots callback is never asked. A roots
round's state that is altered, another call's, another serve's, expired or used twice is refused,
and so is an answer that is not the roots, recording nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from pydantic import FileUrl

from emceepee_cli import paths, seal
from tests.e2e.test_roots import backend_log_says, dirs
from tests.support import HOSTILE, example_table, payload, serving, texts, until_ready, write_config

pytestmark = pytest.mark.anyio

HOST_ROOTS = [types.Root(uri=FileUrl("file:///home/u/app"), name="app")]
ASKER = str(HOSTILE.parent / "roots_asker.py")


def make_config(tmp_path: Path) -> tuple[Path, Path, Path]:
    """`r` (handshake era) and `asker` (2026-07-28) have no roots of their own, `own` has; the log
    of `r`, and the [defaults] root."""
    own, shared = dirs(tmp_path, "own", "shared")
    log = tmp_path / "backend.log"
    config = write_config(
        tmp_path / "config.toml",
        f'[defaults]\nexpose = "both"\nroots = [{json.dumps(str(shared))}]\n',
        example_table("echo", "echo.py"),
        example_table("r", "roots.py", env={"EMCEEPEE_EXAMPLE_LOG": str(log)}),
        example_table("own", "roots.py", roots=[str(own)]),
        example_table("asker", ASKER, protocol="modern"),
    )
    return config, log, shared


class Host:
    """A host's roots callback, counting how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    async def roots(self, ctx: ClientRequestContext) -> types.ListRootsResult:
        self.asked += 1
        return types.ListRootsResult(roots=HOST_ROOTS)


async def call(c: Client, server: str, tool: str) -> types.CallToolResult:
    result = await c.call_tool("execute_tool", {"server": server, "tool": tool, "args": {}})
    assert not result.is_error, result
    return result


def uris(result: types.CallToolResult) -> list[str]:
    assert result.structured_content is not None, result
    return [root["uri"] for root in result.structured_content["roots"]]


async def test_a_2026_host_is_asked_its_roots_once_and_backends_of_either_era_get_them(
    tmp_path: Path,
) -> None:
    config, log, _ = make_config(tmp_path)
    host = Host()
    async with serving(config, mode="auto", list_roots_callback=host.roots) as c:
        with anyio.fail_after(90):
            await until_ready(c, "r", "own", "asker")
            await c.call_tool("list_servers", {})
            before = host.asked  # meta-tools besides execute_tool ask nothing
            echoed = await c.call_tool(
                "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "hi"}}
            )
            await backend_log_says(log, "roots file:///home/u/app")  # `r` was told they changed
            handshake = [uris(await call(c, "r", "list_roots")) for _ in range(3)]
            modern = texts(await call(c, "asker", "where"))
            own = uris(await call(c, "own", "list_roots"))
            direct = await c.call_tool("r__list_roots", {})
    assert before == 0 and host.asked == 1
    assert "roots changed" in log.read_text().splitlines()  # `r` asked at its start, and was told
    assert not echoed.is_error and texts(echoed) == ["hi"]
    assert handshake == [["file:///home/u/app"]] * 3
    assert modern == ["file:///home/u/app"]
    assert own == [(tmp_path / "own").resolve().as_uri()]
    assert uris(direct) == ["file:///home/u/app"]


async def test_a_direct_call_first_asks_the_roots_too(tmp_path: Path) -> None:
    config, _, _ = make_config(tmp_path)
    host = Host()
    async with serving(config, mode="auto", list_roots_callback=host.roots) as c:
        with anyio.fail_after(90):
            await until_ready(c, "asker")
            first = await c.call_tool("asker__where", {})
            again = await c.call_tool("asker__where", {})
    assert texts(first) == texts(again) == ["file:///home/u/app"]
    assert host.asked == 1


async def test_a_2026_host_without_a_roots_callback_is_never_asked(tmp_path: Path) -> None:
    config, _, shared = make_config(tmp_path)

    async def form(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with serving(config, mode="auto", elicitation_callback=form) as c:
        with anyio.fail_after(90):
            await until_ready(c, "asker")
            out = await c.session.call_tool(
                "execute_tool", {"server": "asker", "tool": "where", "args": {}}, allow_input_required=True
            )
    assert isinstance(out, types.CallToolResult) and not out.is_error, out
    assert texts(out) == [shared.resolve().as_uri()]


async def never(ctx: ClientRequestContext) -> types.ListRootsResult:
    raise AssertionError("the test answers the roots round by hand")


async def by_hand(
    c: Client, server: str = "asker", state: str | None = None, responses: dict[str, Any] | None = None
) -> types.CallToolResult | types.InputRequiredResult:
    return await c.session.call_tool(
        "execute_tool",
        {"server": server, "tool": "where", "args": {}},
        request_state=state,
        input_responses=responses,
        allow_input_required=True,
    )


def roots_round(result: types.CallToolResult | types.InputRequiredResult) -> str:
    assert isinstance(result, types.InputRequiredResult), result
    assert result.input_requests is not None and result.request_state is not None
    assert list(result.input_requests) == ["roots"]
    assert isinstance(result.input_requests["roots"], types.ListRootsRequest)
    return result.request_state


def resealed(state: str, **changed: Any) -> str:
    """The round's state with some claims changed, sealed under this install's key (as only someone
    holding it could): what an old or another serve's state looks like."""
    key = seal.install_key(paths.data_dir())
    claims = seal.unseal(key, state, "emo1.")
    assert claims is not None
    return seal.seal(key, {**claims, **changed}, "emo1.")


async def refused_outright(c: Client, state: str, answer: types.ListRootsResult) -> str:
    """A retry whose roots are malformed: refused as invalid params, the error's message."""
    with pytest.raises(MCPError) as refused:
        await by_hand(c, state=state, responses={"roots": answer})
    assert refused.value.error.code == types.INVALID_PARAMS
    return refused.value.error.message


def refusal(result: types.CallToolResult | types.InputRequiredResult) -> str:
    assert isinstance(result, types.CallToolResult) and result.is_error, result
    return "\n".join(texts(result))


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")  # the malformed roots, sent as they are
async def test_hostile_roots_retries_are_refused_recording_nothing(tmp_path: Path) -> None:
    config, _, _ = make_config(tmp_path)
    good = {"roots": types.ListRootsResult(roots=HOST_ROOTS)}
    async with serving(config, mode="auto", list_roots_callback=never) as c:
        with anyio.fail_after(90):
            await until_ready(c, "asker", "r")
            state = roots_round(await by_hand(c))
            foreign = roots_round(await by_hand(c, "r"))
            left = await c.call_tool("list_tasks", {"include_completed": True})  # a round keeps nothing
            body, mac = state.removeprefix("emo1.").split(".")
            tampered = f"emo1.{body[:-2]}{'A' if body[-2] != 'A' else 'B'}{body[-1]}.{mac}"
            refused = {
                "tampered": await by_hand(c, state=tampered, responses=good),
                "foreign": await by_hand(c, state=foreign, responses=good),
                "expired": await by_hand(c, state=resealed(state, exp=1), responses=good),
                "other_serve": await by_hand(c, state=resealed(state, i="another"), responses=good),
                "wrong_kind": await by_hand(
                    c, state=state, responses={"roots": types.ElicitResult(action="accept", content={})}
                ),
                "missing": await by_hand(c, state=state, responses={}),
                "extra": await by_hand(c, state=state, responses={**good, "more": good["roots"]}),
            }
            malformed = [
                await refused_outright(c, state, types.ListRootsResult.model_construct(roots=roots))
                for roots in ([{"uri": "https://x"}], "nope", [{"name": "no uri"}])
            ]
            still_asked = roots_round(await by_hand(c))  # nothing refused was kept
            done = await by_hand(c, state=state, responses=good)
            replayed = await by_hand(c, state=state, responses=good)
            after = await by_hand(c)
    expected = {
        "tampered": "This request_state was not issued by this emceepee, or was altered.",
        "foreign": "This request_state (the host's roots) belongs to another call, not to asker.where",
        "expired": "This request_state (the host's roots) has expired.",
        "other_serve": "This request_state (the host's roots) was issued by another emceepee process",
        "wrong_kind": "input_responses['roots'] must be a ListRootsResult (the host's roots), not a "
        "ElicitResult",
        "missing": "input_responses['roots'] must be a ListRootsResult (the host's roots), not nothing",
        "extra": "input_responses has 'more', which this round did not ask",
    }
    for name, start in expected.items():
        assert refusal(refused[name]).startswith(start), (name, refusal(refused[name]))
    wrong = [
        "roots.0.uri: URL scheme should be 'file'",
        "roots: Input should be a valid list",
        "roots.0.uri: Field",
    ]
    for message, field in zip(malformed, wrong, strict=True):
        assert message.startswith(
            f"input_responses['roots'] is not a ListRootsResult (the host's roots): {field}"
        )
    assert payload(left)["tasks"] == []
    assert still_asked.startswith("emo1.")
    assert isinstance(done, types.CallToolResult) and texts(done) == ["file:///home/u/app"]
    assert "was already answered; a request_state is used once" in refusal(replayed)
    assert isinstance(after, types.CallToolResult) and texts(after) == ["file:///home/u/app"]
