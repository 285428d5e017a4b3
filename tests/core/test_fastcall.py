"""The fast lane writes, without a model, the very bytes the slow path writes for a plain result."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pydantic_core
import pytest
from mcp_types import methods

from emceepee_cli.backends.raw_pipe import loads
from emceepee_cli.jsonrpc import canonical

PLAIN: list[dict[str, Any]] = [
    {"content": [{"type": "text", "text": 'é \\ " \n \u2028 \x01 😀 </script>'}], "isError": False},
    {"content": [{"type": "text", "text": "no isError"}]},
    {
        "content": [],
        "isError": True,
        "structuredContent": {"b": 1.0, "a": [1, None, 1e300, -0.0, 2**70, 5e-324]},
    },
    {"_meta": {"k": {"z": 1, "a": 2}}, "content": [{"text": "x", "type": "text"}], "isError": False},
]
OTHER: list[dict[str, Any]] = [
    {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}], "isError": False},
    {"content": [{"type": "text", "text": "x", "annotations": {"priority": 1}}]},
    {"content": [{"type": "text", "text": "x"}], "unknown": 1},
    {"content": [{"type": "text", "text": "x"}], "structuredContent": [1, 2]},
    {"content": [{"type": "text", "text": "x"}], "structuredContent": None},
    {"content": "not a list"},
]


def slow_path(body: bytes) -> bytes:
    """What the SDK server writes for this result, as emceepee's slow path hands it over."""
    model = types.CallToolResult.model_validate_json(body)
    dumped = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return pydantic_core.to_json(methods.serialize_server_result("tools/call", "2025-11-25", dumped))


@pytest.mark.parametrize("result", PLAIN)
@pytest.mark.parametrize("compact", [True, False])
def test_a_plain_result_gets_the_slow_paths_bytes(result: dict[str, Any], compact: bool) -> None:
    body = json.dumps(result, ensure_ascii=not compact, separators=(",", ":") if compact else None).encode()
    assert canonical(json.loads(body), body) == slow_path(body)


def test_an_sdk_backends_own_bytes_are_kept_as_they_are() -> None:
    body = slow_path(json.dumps(PLAIN[3]).encode())
    assert canonical(json.loads(body), body) is body


@pytest.mark.parametrize("result", OTHER)
def test_any_other_shape_is_left_to_the_model(result: dict[str, Any]) -> None:
    body = json.dumps(result).encode()
    assert canonical(json.loads(body), body) is None


def test_what_the_slow_parser_refuses_is_left_to_it() -> None:
    body = b'{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":NaN}}'
    assert canonical(json.loads(body), body) is None
    huge = b'{"content":[{"type":"text","text":"x"}],"_meta":{"deep":[{"n":-1e400}]}}'
    assert canonical(json.loads(huge), huge) is None
    text = b'{"content":[{"type":"text","text":"NaN and Infinity"}],"isError":false}'
    assert canonical(json.loads(text), text) == slow_path(text)  # in a text, they are just words
    lone = b'{"content":[{"type":"text","text":"\\ud83d"}],"isError":false}'
    assert canonical(json.loads(lone), lone) is None


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 123456789012345678901234567890, "b": -0.0, "c": 5e-324, "d": 1e400}',
        b'{"k": 1, "k": 2}',
    ],
)
def test_the_fast_parser_reads_json_as_json_does(text: bytes) -> None:
    assert repr(loads(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", [b'{"a": "\\ud83d lone"}', b"[" * 300 + b"]" * 300])
def test_what_the_sdk_parser_refuses_the_fast_parser_refuses_though_json_reads_it(text: bytes) -> None:
    json.loads(text)
    with pytest.raises(ValueError):
        loads(text)


def test_what_json_refuses_is_refused() -> None:
    with pytest.raises(ValueError):
        loads(b'{"a": ')
