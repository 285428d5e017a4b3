"""The resumable example backend, driven directly with the SDK's client: its pages, polls and tokens."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, ClassVar, Literal

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from pydantic import ConfigDict

from tests.support import EXAMPLES, text_of

pytestmark = pytest.mark.anyio

NEXT = "nextResumeToken"
# Where a result carries its token -> where the test sends it back (each way the backend accepts).
ROUTES = {"result": "params", "structured": "arguments", "meta": "meta"}


class RawResult(types.CallToolResult):
    """A tools/call result that keeps fields the spec does not define (the SDK's own type drops them)."""

    model_config = ConfigDict(extra="allow")


class RawToolsCall(types.Request[dict[str, Any], Literal["tools/call"]]):
    """tools/call with params as a plain dict, so a top-level `resumeToken` reaches the wire."""

    method: Literal["tools/call"] = "tools/call"
    params: dict[str, Any]
    name_param: ClassVar[str | None] = "name"


def resumable_backend(record: Path, mode: str = "legacy", **env: str) -> Client:
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(EXAMPLES / "resumable.py")],
        env={"EMCEEPEE_EXAMPLE_LOG": str(record), **env},
    )
    return Client(params, mode=mode)


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "resumable.log"


async def call(
    client: Client, tool: str, args: dict[str, Any], token: str | None = None, via: str = "params"
) -> RawResult:
    params: dict[str, Any] = {"name": tool, "arguments": dict(args)}
    if token is not None and via == "params":
        params["resumeToken"] = token
    elif token is not None and via == "meta":
        params["_meta"] = {"resumeToken": token}
    elif token is not None:
        params["arguments"]["resumeToken"] = token
    return await client.session.send_request(RawToolsCall(params=params), RawResult)


def tokens(result: RawResult) -> dict[str, str]:
    """Every place a token was found in the result."""
    found = {
        "result": (result.model_extra or {}).get(NEXT),
        "structured": (result.structured_content or {}).get(NEXT),
        "meta": (result.meta or {}).get(NEXT),
    }
    return {where: token for where, token in found.items() if token is not None}


def text(result: types.CallToolResult) -> str:
    return text_of(result.content[0])


@pytest.mark.parametrize("placement", list(ROUTES))
async def test_search_pages_until_a_page_without_a_token(record: Path, placement: str) -> None:
    args = {"query": "P", "placement": placement}
    async with resumable_backend(record) as client:
        with anyio.fail_after(30):
            pages = [await call(client, "search", args)]
            while found := tokens(pages[-1]):
                assert list(found) == [placement]  # only where asked
                pages.append(await call(client, "search", args, found[placement], via=ROUTES[placement]))
    assert [text(page) for page in pages] == [
        'page 1 of 3 for "P": apple, apricot, grape',
        'page 2 of 3 for "P": grapefruit, papaya, pear',
        'page 3 of 3 for "P": pineapple, plum',
    ]
    assert [page.structured_content["items"] for page in pages][-1] == ["pineapple", "plum"]
    normalized = json.dumps({"page_size": 3, "placement": placement, "query": "P"}, sort_keys=True)
    assert record.read_text().splitlines() == [
        f"called search {normalized} resume=none",
        f"called search {normalized} resume={ROUTES[placement]}",
        f"called search {normalized} resume={ROUTES[placement]}",
    ]


async def test_a_top_level_token_also_travels_in_the_2026_era(record: Path) -> None:
    async with resumable_backend(record, mode="auto") as client:
        with anyio.fail_after(30):
            first = await call(client, "search", {"query": "p"})
            second = await call(client, "search", {"query": "p"}, tokens(first)["result"])
            era = client.protocol_version
    assert era == "2026-07-28"
    assert text(second).startswith("page 2 of 3")


async def test_the_sdk_call_tool_drops_a_top_level_token(record: Path) -> None:
    """Why a client must read the raw result for the proposal's own placement."""
    async with resumable_backend(record) as client:
        with anyio.fail_after(30):
            raw = await call(client, "search", {"query": "p"})
            typed = await client.call_tool("search", {"query": "p"})
    assert NEXT in (raw.model_extra or {})
    assert NEXT not in typed.model_dump(by_alias=True) and not typed.meta


async def test_a_job_is_ready_on_the_nth_poll_with_a_new_token_each_time(record: Path) -> None:
    args = {"name": "build", "polls": 3, "placement": "meta", "seconds": 0.2}
    async with resumable_backend(record) as client:
        with anyio.fail_after(30):
            started = time.monotonic()
            results = [await call(client, "job", args)]
            while found := tokens(results[-1]):
                results.append(await call(client, "job", args, found["meta"], via="meta"))
            elapsed = time.monotonic() - started
    assert [text(r) for r in results] == [
        "job build: not ready (poll 0 of 3)",
        "job build: not ready (poll 1 of 3)",
        "job build: not ready (poll 2 of 3)",
        "job build: ready after 3 polls",
    ]
    assert [r.structured_content["status"] for r in results] == ["working"] * 3 + ["ready"]
    issued = [tokens(r)["meta"] for r in results[:-1]]
    assert len(set(issued)) == 3
    assert elapsed >= 4 * 0.2  # every call took its `seconds`


async def test_a_token_survives_a_backend_restart(record: Path) -> None:
    async with resumable_backend(record) as first:
        with anyio.fail_after(30):
            token = tokens(await call(first, "search", {"query": "p"}))["result"]
    async with resumable_backend(record) as second:  # a new process: nothing kept but the token
        with anyio.fail_after(30):
            page = await call(second, "search", {"query": "p"}, token)
    assert text(page) == 'page 2 of 3 for "p": grapefruit, papaya, pear'


async def test_forged_foreign_and_conflicting_tokens_are_refused(record: Path) -> None:
    async with resumable_backend(record) as client:
        with anyio.fail_after(30):
            token = tokens(await call(client, "search", {"query": "p"}))["result"]
            job_token = tokens(await call(client, "job", {"name": "j"}))["result"]
            body, _, mac = token.partition(".")
            cases = {
                "altered": (("search", {"query": "p"}, body + "x." + mac), "not issued by this server"),
                "forged": (("search", {"query": "p"}, "nonsense"), "not issued by this server"),
                "other arguments": (("search", {"query": "pe"}, token), "it belongs to another search call"),
                "other tool": (("search", {"query": "p"}, job_token), "it belongs to another search call"),
            }
            for name, ((tool, args, bad), why) in cases.items():
                with pytest.raises(MCPError, match=f"Invalid resumeToken: {why}") as caught:
                    await call(client, tool, args, bad)
                assert caught.value.code == types.INVALID_PARAMS, name
            with pytest.raises(MCPError, match="different tokens in params, arguments"):
                await call(client, "search", {"query": "p", "resumeToken": job_token}, token)


async def test_an_expired_token_is_refused(record: Path) -> None:
    async with resumable_backend(record, EMCEEPEE_EXAMPLE_TOKEN_TTL_S="-1") as client:
        with anyio.fail_after(30):
            token = tokens(await call(client, "search", {"query": "p"}))["result"]
            with pytest.raises(MCPError, match="Invalid resumeToken: expired"):
                await call(client, "search", {"query": "p"}, token)
