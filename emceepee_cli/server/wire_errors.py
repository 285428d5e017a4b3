"""What the stdio wire (server/stdio.py) answers instead of passing a message on: the JSON-RPC
error for a line or batch entry that is not a valid message, the reading of one entry of a
batch as a line alone would be read, and the error written in place of an answer that cannot be
written as JSON text.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import mcp_types as types
import pydantic
import pydantic_core

from emceepee_cli import jsonrpc
from emceepee_cli.jsonrpc import valid_id
from emceepee_cli.server import host_answers, host_input

log = logging.getLogger(__name__)


def has_id(raw: bytes) -> bool:
    """Whether a line the SDK read as a notification holds an `id` all the same (null, or `true`):
    a request whose id is not one."""
    try:
        doc = pydantic_core.from_json(raw)
    except ValueError:
        return False
    return isinstance(doc, dict) and "id" in doc


def batch_entry(raw: bytes, item: object) -> tuple[types.JSONRPCError | None, types.JSONRPCMessage | None]:
    """One entry of the batch `raw`, as a line alone would be taken: the error it is answered with
    at once, and the message the server is handed (an answer's, perhaps its request's failure)."""
    if host_answers.is_answer(item):
        assert isinstance(item, dict)
        return None, host_answers.answer(raw, item)
    try:
        message = types.jsonrpc_message_adapter.validate_python(item, by_name=False)
    except pydantic.ValidationError:
        return invalid(item), None
    if isinstance(message, types.JSONRPCNotification) and isinstance(item, dict) and "id" in item:
        return jsonrpc.error(None, "Invalid Request: bad 'id'"), None
    if isinstance(message, types.JSONRPCRequest | types.JSONRPCNotification):
        wrong = host_input.fault(raw, message.params)
        if wrong is not None and isinstance(message, types.JSONRPCRequest):
            log.warning("refused request %s in a batch: %s", json.dumps(message.id)[:100], wrong)
            return jsonrpc.error(message.id, f"Invalid params: {wrong}", types.INVALID_PARAMS), None
        if wrong is not None:  # nobody to answer: as a notification the server could not read
            log.warning("dropped notification %s in a batch: %s", message.method[:100], wrong)
            return None, None
    return None, message


def invalid(doc: object) -> types.JSONRPCError:
    """The error for JSON that is not a valid message (an answer is taken by `host_answers`)."""
    if not isinstance(doc, dict):
        return jsonrpc.error(None, "Invalid Request: a message must be a JSON object")
    request_id = doc.get("id")
    return jsonrpc.error(request_id if valid_id(request_id) else None, f"Invalid Request: {_why(doc)}")


def _why(doc: dict[str, Any]) -> str:
    if doc.get("jsonrpc") != "2.0":
        return "'jsonrpc' must be \"2.0\""
    if not isinstance(doc.get("method"), str):
        return "'method' must be a string"
    if "id" in doc and not valid_id(doc["id"]):
        return "'id' must be a string or an integer"
    if "params" in doc and not isinstance(doc["params"], dict):
        return "'params' must be an object"
    return "not a valid JSON-RPC 2.0 message"


def no_batches(protocol: str | None) -> str:
    """Why an array is refused under any MCP version but the one whose JSON-RPC has batches."""
    spoken = f"protocol version {protocol}" if protocol else "this connection before initialize"
    return f"JSON-RPC batches are not part of MCP {spoken}; send one message per line"


def line_or_error(message: types.JSONRPCMessage) -> str | None:
    """The message's line; for an answer that cannot be written as JSON text (a lone surrogate
    from somewhere), an error in its place, so the request still gets its answer. None: a
    notification or request of ours that cannot be written, dropped (it is logged)."""
    try:
        return jsonrpc.text(message)
    except (ValueError, UnicodeError) as exc:  # pydantic's serialization error is a ValueError
        request_id = getattr(message, "id", None)
        log.error("cannot write a message to the host (%s): %s", type(message).__name__, exc)
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError) or request_id is None:
            return None
        why = "emceepee could not write its answer as JSON text; its stderr log has the details"
        return jsonrpc.text(jsonrpc.error(request_id, why, types.INTERNAL_ERROR))
