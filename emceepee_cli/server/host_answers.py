"""The host's answers to our own requests (elicitation/create, sampling/createMessage, roots/list),
checked at the wire before the SDK server settles the request they answer.

An answer that cannot be used — not a valid JSON-RPC response, or holding what nothing here can
carry (server/host_input.py: a lone surrogate, nesting past `MAX_DEPTH`), whether or not the SDK's
parser read its line — is handed to the server as `questions.host_link.refused_answer`: the failure of the
request it answers, at once, naming the field. Whoever waits on that request falls back then (a
forwarded question is parked, roots/list leaves the configured roots) instead of at its timeout.
Nothing is written back to the host: answering an answer invites a loop. An answer whose id
cannot be read settles nothing, and is only logged.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import mcp_types as types
import pydantic

from emceepee_cli.jsonrpc import valid_id
from emceepee_cli.questions.host_link import refused_answer
from emceepee_cli.server import host_input

log = logging.getLogger(__name__)


def is_answer(doc: object) -> bool:
    """An answer to one of our requests (no method; a result or an error), valid or not."""
    return isinstance(doc, dict) and "method" not in doc and ("result" in doc or "error" in doc)


def answer(raw: bytes, doc: dict[str, Any]) -> types.JSONRPCMessage | None:
    """The host's answer `doc` (from the line `raw`) as the server is to get it: itself when it can
    be used, else the failure of the request it answers; None: its id cannot be read (logged)."""
    try:
        message = types.jsonrpc_message_adapter.validate_python(doc, by_name=False)
    except pydantic.ValidationError:
        return _unusable(doc.get("id"), _fault(doc))
    if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
        return _unusable(doc.get("id"), "it is not a valid JSON-RPC 2.0 response")
    return checked(raw, message)


def checked(raw: bytes, message: types.JSONRPCResponse | types.JSONRPCError) -> types.JSONRPCMessage | None:
    """An answer the SDK's parser took, unless it holds what nothing here can carry (in an error
    answer too: its text is logged and shown to the model)."""
    if isinstance(message, types.JSONRPCResponse):
        wrong = host_input.fault(raw, message.result, root="result")
    else:
        wrong = host_input.fault(raw, message.error.model_dump(exclude_unset=True), root="error")
    return message if wrong is None or message.id is None else _unusable(message.id, wrong)


def _unusable(request_id: object, why: str) -> types.JSONRPCError | None:
    shown = json.dumps(request_id)[:100]
    if not valid_id(request_id):
        log.warning("dropped a malformed response from the host (id %s): %s", shown, why)
        return None
    log.warning("the host's answer to request %s cannot be used: %s", shown, why)
    return refused_answer(request_id, why)


def _fault(doc: dict[str, Any]) -> str:
    """Why `doc` is not a valid response."""
    if doc.get("jsonrpc") != "2.0":
        return "'jsonrpc' must be \"2.0\""
    if "result" in doc and "error" in doc:
        return "a response holds 'result' or 'error', not both"
    if "result" in doc and not isinstance(doc["result"], dict):
        return "'result' must be an object"
    if "error" in doc:
        return "'error' must be an object with an integer 'code' and a string 'message'"
    return "it is not a valid JSON-RPC 2.0 response"
