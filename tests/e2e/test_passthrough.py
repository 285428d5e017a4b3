"""What a backend answers to a request passed through reaches the host as the backend said it, over
the real `serve`: its JSON-RPC errors on prompts/get, resources/read and completion/complete keep
their code and message, with the server named in `data`; errors no host should see whole (a 1 MiB
message) or that are not JSON-RPC at all leave `serve` answering; and the get_prompt meta-tool gives
the prompt in the protocol's own names, as the native prompts/get does."""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.support import (
    example_table,
    payload,
    refusal,
    rpc_errors_table,
    serving,
    still_answering,
    text_of,
    texts,
    until_ready,
    write_config,
)

pytestmark = [
    pytest.mark.anyio,
    # a handshake-era host's ping and resources/subscribe, deprecated as of 2026-07-28
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(
        tmp_path / "config.toml", example_table("surface", "surface.py"), rpc_errors_table("errs")
    )


async def as_a_host_begins(client: Client) -> None:
    """List first and make a few good requests, as a host does before the case at hand."""
    await until_ready(client, "surface", "errs")
    prompts = await client.list_prompts()
    assert {"surface__review", "errs__fail", "errs__embedded"} <= {p.name for p in prompts.prompts}
    await client.list_resources()
    await client.list_resource_templates()
    review = await client.get_prompt("surface__review", {"language": "rust"})
    assert "rust" in text_of(review.messages[0].content)
    listed = await client.read_resource("err://listed")
    assert text_of(listed.contents[0]) == "listed"


async def test_backend_errors_reach_the_host_with_their_own_code_message_and_server(config: Path) -> None:
    review, fail = types.PromptReference(name="surface__review"), types.PromptReference(name="errs__fail")
    async with serving(config) as client:
        with anyio.fail_after(60):
            await as_a_host_begins(client)
            sdk_prompt = await refusal(client.get_prompt("surface__review", {}))
            raw_prompt = await refusal(
                client.get_prompt(
                    "errs__fail", {"code": "-32602", "message": "Missing argument: q", "data": '{"arg": "q"}'}
                )
            )
            own_code = await refusal(client.get_prompt("errs__fail", {"code": "-31001", "message": "quota"}))
            sdk_read = await refusal(client.read_resource("surface://notes/missing"))
            raw_read = await refusal(client.read_resource("err://fail/-32002"))
            sdk_complete = await refusal(client.complete(review, {"name": "nope", "value": "x"}))
            raw_complete = await refusal(client.complete(fail, {"name": "code", "value": "-32602"}))
            ours = await refusal(client.get_prompt("nobody__nothing", {}))
            again = await client.get_prompt("surface__review", {"language": "go"})
    assert (sdk_prompt.code, sdk_prompt.message) == (-32602, "Missing required argument: language")
    assert sdk_prompt.data == {"server": "surface"}
    assert (raw_prompt.code, raw_prompt.message) == (-32602, "Missing argument: q")
    assert raw_prompt.data == {"arg": "q", "server": "errs"}  # the backend's data, with the server
    assert (own_code.code, own_code.message, own_code.data) == (-31001, "quota", {"server": "errs"})
    assert (sdk_read.code, sdk_read.message) == (-32602, "Unknown resource: surface://notes/missing")
    assert (raw_read.code, raw_read.message) == (-32002, "Resource not found: err://fail/-32002")
    assert raw_read.data == {"uri": "err://fail/-32002", "server": "errs"}
    assert sdk_complete.code == -32602 and "no argument 'nope'" in sdk_complete.message
    assert sdk_complete.data == {"server": "surface"}
    assert (raw_complete.code, raw_complete.message) == (-32602, "no completions")
    assert raw_complete.data == {"value": "-32602", "server": "errs"}
    assert (
        ours.code == -32602 and ours.message.startswith("No prompt 'nobody__nothing'.") and ours.data is None
    )
    assert "go" in text_of(again.messages[0].content)


async def odd(client: Client, kind: str) -> types.ErrorData:
    """The error the host gets for the backend's odd error `kind` (rpc_errors.py's ODD); serve
    still answers after it."""
    error = await refusal(client.read_resource(f"err://odd/{kind}"))
    await still_answering(client)
    return error


async def test_odd_and_huge_backend_errors_leave_serve_answering(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(90):
            await as_a_host_begins(client)
            errors = {
                kind: await odd(client, kind)
                for kind in (
                    "huge_message",
                    "huge_data",
                    "list_data",
                    "string_data",
                    "number_data",
                    "server_in_data",
                    "deep_data",
                    "big_code",
                    "unicode",
                    "string_code",
                    "number_message",
                    "float_code",
                    "no_message",
                    "null_error",
                )
            }
            listed = await client.read_resource("err://listed")
            servers = payload(await client.call_tool("list_servers", {}))["servers"]
    huge = errors["huge_message"]
    assert huge.code == -32602 and huge.message.startswith("x" * 1000) and len(huge.message) < 17 * 1024
    assert huge.message.endswith(f"({1024 * 1024 - 16 * 1024} more characters cut)")
    assert errors["huge_data"].data == {"blob": "y" * (2 * 1024 * 1024), "server": "errs"}
    assert errors["list_data"].data == {"server": "errs", "data": [1, "two", None, {"three": 3}]}
    assert errors["string_data"].data == {"server": "errs", "data": "just a string"}
    assert errors["number_data"].data == {"server": "errs", "data": 1.5}
    assert errors["server_in_data"].data == {"server": "errs", "data": {"server": "theirs"}}
    assert errors["deep_data"].data["server"] == "errs"
    assert errors["big_code"].code == 2**62
    assert errors["unicode"].message == "caf\u00e9 \u2603 \U0001f600\n second line\ttab"
    assert (errors["string_code"].code, errors["string_code"].message) == (-32602, "a code in a string")
    for kind in ("number_message", "float_code", "no_message", "null_error"):  # not JSON-RPC errors
        assert errors[kind].code == -32603, (kind, errors[kind])
        assert errors[kind].message.startswith("emceepee refused backend 'errs's answer"), errors[kind]
    assert text_of(listed.contents[0]) == "listed"
    assert all(row["status"] == "ready" for row in servers), servers


async def test_get_prompt_gives_the_prompt_in_the_protocols_own_names(config: Path) -> None:
    async with serving(config) as client:
        with anyio.fail_after(60):
            await as_a_host_begins(client)
            listed = payload(await client.call_tool("list_prompts", {"server": "errs"}))
            result = await client.call_tool("get_prompt", {"server": "errs", "name": "embedded"})
            native = await client.get_prompt("errs__embedded")
    assert [p["name"] for p in listed["servers"][0]["prompts"]] == ["fail", "embedded"]
    prompt = payload(result)
    assert prompt == {
        "_meta": {"example.com/k": "v"},
        "description": "with media",
        "messages": [
            {"role": "user", "content": {"type": "image", "data": "aGk=", "mimeType": "image/png"}},
            {
                "role": "assistant",
                "content": {
                    "type": "resource",
                    "resource": {"uri": "err://listed", "mimeType": "text/plain", "text": "listed"},
                },
            },
        ],
    }
    wire = native.model_dump(by_alias=True, mode="json", exclude_none=True)
    assert prompt == {key: value for key, value in wire.items() if key != "resultType"}
    assert not any("mime_type" in text for text in texts(result))
