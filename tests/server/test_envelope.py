"""The shape of every meta-tool result: our JSON twice (text and structuredContent), a backend's
result untouched with the envelope as text only, errors as isError results; secrets redacted."""

from __future__ import annotations

import json

import mcp_types as types

from emceepee_cli import redact
from emceepee_cli.errors import NotFound
from emceepee_cli.server.envelope import error_result, payload_result, with_envelope
from emceepee_cli.store.records import Event

SECRET = "s3cret-value-123"
EVENT = Event(event_id="E1", type="task_status", server="s", created_at="t", data={"note": SECRET})


def test_our_answer_is_one_json_object_as_text_and_as_structured_content_after_its_summary() -> None:
    result = payload_result({"tasks": [{"id": 1}]}, "One task.")
    blocks = [b.text for b in result.content if isinstance(b, types.TextContent)]
    assert blocks == ["One task.", '{"tasks":[{"id":1}]}']
    assert result.structured_content == {"tasks": [{"id": 1}]} and not result.is_error


def test_an_error_is_a_result_with_the_message_and_the_hint_redacted() -> None:
    redact.register("TOKEN", SECRET)
    result = error_result(NotFound(f"No server '{SECRET}'.", hint="See list_servers."))
    assert result.is_error
    assert result.structured_content == {
        "error": {"type": "NotFound", "message": "No server '${TOKEN}'.", "hint": "See list_servers."}
    }
    assert SECRET not in result.model_dump_json()


def test_the_envelope_rides_along_only_when_there_is_something_to_say() -> None:
    redact.register("TOKEN", SECRET)
    ours = with_envelope(payload_result({"ok": True}), [EVENT], {"elicitations": []}, own=True)
    backends = types.CallToolResult(content=[types.TextContent(text="raw")], structured_content={"n": 1})
    passed = with_envelope(backends, [EVENT], {}, own=False)
    quiet = with_envelope(backends, [], {}, own=False)
    assert ours.structured_content is not None and ours.structured_content["ok"] is True
    assert ours.structured_content["events_since_last_response"][0]["data"] == {"note": "${TOKEN}"}
    assert passed.structured_content == {"n": 1}  # a backend's own result is left as it came
    texts = [b.text for b in passed.content if isinstance(b, types.TextContent)]
    assert texts[0] == "raw" and json.loads(texts[1])["events_since_last_response"][0]["event_id"] == "E1"
    assert quiet is backends
