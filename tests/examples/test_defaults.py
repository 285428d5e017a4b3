"""The "defaults" example backend, driven directly: a form with SEP-1034 defaults, returned as received."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientRequestContext

from tests.examples.direct import direct, events

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


def answering(content: dict[str, Any] | None, seen: list[dict[str, Any]]) -> Any:
    async def on_elicit(ctx: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        seen.append(params.requested_schema)
        if content is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=content)

    return on_elicit


async def call_profile(
    content: dict[str, Any] | None, log: Path | None = None
) -> tuple[Any, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    async with direct("defaults.py", log, elicitation_callback=answering(content, seen)) as client:
        with anyio.fail_after(20):
            await client.list_tools()
            result = await client.call_tool("profile", {})
    return result, seen


async def test_every_primitive_kind_carries_a_default() -> None:
    result, seen = await call_profile(dict(DEFAULTS))
    (schema,) = seen
    assert {name: prop["default"] for name, prop in schema["properties"].items()} == DEFAULTS
    kinds = {prop["type"] for prop in schema["properties"].values()}
    assert kinds == {"string", "integer", "number", "boolean", "array"}
    assert not result.is_error and json.loads(result.content[0].text) == DEFAULTS


async def test_an_empty_accept_is_returned_as_it_came_and_fails_the_schema(tmp_path: Path) -> None:
    log = tmp_path / "backend.log"
    result, _ = await call_profile({}, log)
    assert result.is_error
    assert result.content[0].text.startswith(
        "content does not match the schema: 'age' is a required property"
    )
    assert result.structured_content["content"] == {}
    assert len(result.structured_content["problems"]) == 5
    assert events(log) == ['answer {"action": "accept", "content": {}}']


async def test_a_partial_answer_is_not_completed_by_the_backend() -> None:
    result, _ = await call_profile(
        {"name": "Grace", "age": 40, "subscribed": False, "plan": "team", "color": "#FF0000"}
    )
    assert not result.is_error
    assert result.structured_content["content"] == {
        "name": "Grace",
        "age": 40,
        "subscribed": False,
        "plan": "team",
        "color": "#FF0000",
    }


async def test_a_decline_is_reported() -> None:
    result, _ = await call_profile(None)
    assert not result.is_error and result.structured_content == {"action": "decline"}
