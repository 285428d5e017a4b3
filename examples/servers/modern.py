"""Example backend "modern": a multi-round tool written for the 2026-07-28 protocol era.

emceepee's tests and demo spawn it as ``python examples/servers/modern.py``. It speaks MCP
over stdio.

Tools
    book(city)
        Round 1: asks for a date (form elicitation {date: string, required}).
        Round 2: asks the client's LLM "Suggest a hotel in <city> on <date>" (sampling).
        Round 3: returns "booked <hotel> in <city> on <date>".
        Declining or cancelling the date question ends the call with the text
        "booking declined" / "booking cancelled" (not an error).
    trip(city)
        Five rounds, one question each: a date (form), a hotel (sampling), the number of nights
        (form, integer >= 1), a restaurant (sampling), and whether to book it all (form,
        boolean). Returns "trip to <city> on <date>: <nights> nights at <hotel>, dinner at
        <restaurant>", or "trip not booked" when the last answer is false. Declining any
        question ends it with "trip declined at <key>".

How the questions travel depends on the era the client negotiated:

* 2026-07-28: servers cannot send requests, so ``book`` *returns* an InputRequiredResult
  (the questions in ``inputRequests`` plus an opaque ``requestState``). The client answers
  and repeats the same tools/call with ``inputResponses`` and that ``requestState``.
  The server keeps nothing between rounds: the state is base64url-encoded JSON holding the
  city, the step and the date so far, so a freshly restarted process can continue a call
  begun by another. It is deliberately *not* sealed, to stay readable in tests; a real
  server should seal it (e.g. mcp.server.request_state.RequestStateBoundary with keys
  shared by every process that may receive the retry).
* Handshake era (<= 2025-11-25): the same steps run inside one call, and each question is
  sent to the client as an ordinary server-to-client request (elicitation/create, then
  sampling/createMessage).

Either way a missing client capability, a refused request or a malformed answer gives a
result with isError=true; a requestState that does not decode, or that belongs to another
city, is rejected with INVALID_PARAMS.

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, one line is appended for
every input response the server receives:
    answer {"action": "accept", "content": {"date": "..."}, "key": "date"}
    answer {"key": "hotel", "model": "...", "text": "..."}

    answer {"key": "nights", ...}                (trip: one line per answer, as above)

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from _example import append_event, serve, text_result
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

NAME = "modern"
log = logging.getLogger(NAME)

BOOK = types.Tool(
    name="book",
    description="Book a hotel: asks you for a date, then asks your LLM to pick a hotel.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)

# Keys under which the questions appear in inputRequests / inputResponses.
DATE_KEY = "date"
HOTEL_KEY = "hotel"


ToolReply = types.CallToolResult | types.InputRequiredResult

# --------------------------------------------------------------------------- request state
# Everything the tool knows between rounds lives here, never in the process.


def encode_state(state: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(state, sort_keys=True).encode()).decode()


def decode_state(blob: str, city: str) -> dict[str, Any]:
    try:
        state = json.loads(base64.urlsafe_b64decode(blob.encode()))
    except (binascii.Error, ValueError) as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise MCPError(types.INVALID_PARAMS, f"Invalid requestState: {exc}") from exc
    if not isinstance(state, dict) or state.get("step") not in (DATE_KEY, HOTEL_KEY):
        raise MCPError(types.INVALID_PARAMS, "Invalid requestState: unknown step")
    # The retry must repeat the original arguments; a state from another call is refused.
    if state.get("city") != city:
        raise MCPError(types.INVALID_PARAMS, "Invalid requestState: it belongs to a call for another city")
    return state


# --------------------------------------------------------------------------- the tool's steps


@dataclass
class NeedInput:
    """The tool cannot finish yet: it needs answers to `requests`, then resumes from `state`."""

    requests: dict[str, types.ElicitRequest | types.CreateMessageRequest]
    state: dict[str, Any]


def ask_for_date(city: str) -> NeedInput:
    question = types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=f"On what date do you want a hotel in {city}?",
            requested_schema={
                "type": "object",
                "properties": {
                    DATE_KEY: {"type": "string", "title": "Date", "description": "e.g. 2026-08-01"}
                },
                "required": [DATE_KEY],
            },
        )
    )
    return NeedInput({DATE_KEY: question}, {"city": city, "step": DATE_KEY})


def ask_for_hotel(city: str, date: str) -> NeedInput:
    question = types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[
                types.SamplingMessage(
                    role="user", content=types.TextContent(text=f"Suggest a hotel in {city} on {date}")
                )
            ],
            system_prompt="Answer with the name of one hotel and nothing else.",
            max_tokens=100,
        )
    )
    return NeedInput({HOTEL_KEY: question}, {"city": city, "step": HOTEL_KEY, "date": date})


def book_step(
    city: str, state: dict[str, Any] | None, responses: Mapping[str, types.InputResponse]
) -> NeedInput | types.CallToolResult:
    """Advance the booking by one round: from (state, answers) to the next question or the result."""
    if state is None:
        return ask_for_date(city)

    if state["step"] == DATE_KEY:
        answer = responses.get(DATE_KEY)
        if not isinstance(answer, types.ElicitResult):
            return ask_for_date(city)  # no (usable) answer: ask again, as the spec suggests
        record: dict[str, Any] = {"key": DATE_KEY, "action": answer.action}
        if answer.content is not None:
            record["content"] = answer.content
        append_event("answer " + json.dumps(record, sort_keys=True))
        if answer.action != "accept":
            return text_result("booking declined" if answer.action == "decline" else "booking cancelled")
        date = (answer.content or {}).get(DATE_KEY)
        # The SDK checks only the shape of an answer, not the requested schema.
        if not isinstance(date, str) or not date:
            return text_result("the date answer did not contain a date", is_error=True)
        return ask_for_hotel(city, date)

    # state["step"] == HOTEL_KEY
    date = str(state.get("date", ""))
    answer = responses.get(HOTEL_KEY)
    if not isinstance(answer, types.CreateMessageResult):
        return ask_for_hotel(city, date)
    hotel = answer.content.text.strip() if isinstance(answer.content, types.TextContent) else None
    append_event(
        "answer " + json.dumps({"key": HOTEL_KEY, "model": answer.model, "text": hotel}, sort_keys=True)
    )
    if not hotel:
        return text_result("the hotel suggestion was empty or not text", is_error=True)
    return text_result(f"booked {hotel} in {city} on {date}")


# --------------------------------------------------------------------------- the trip: five rounds

TRIP = types.Tool(
    name="trip",
    description="Plan a trip: asks you three questions and your LLM two, one after another.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TRIP_KEYS = ("date", "hotel", "nights", "dinner", "confirm")


def form(message: str, key: str, field: dict[str, Any]) -> types.ElicitRequest:
    schema = {"type": "object", "properties": {key: field}, "required": [key]}
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def llm(prompt: str) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=100)
    )


def trip_question(
    city: str, key: str, answers: dict[str, Any]
) -> types.ElicitRequest | types.CreateMessageRequest:
    """The question of step `key`, given the answers so far."""
    if key == "date":
        return form(f"On what date do you travel to {city}?", key, {"type": "string"})
    if key == "hotel":
        return llm(f"Suggest a hotel in {city} on {answers['date']}")
    if key == "nights":
        return form(f"How many nights at {answers['hotel']}?", key, {"type": "integer", "minimum": 1})
    if key == "dinner":
        return llm(f"Suggest a restaurant near {answers['hotel']}")
    return form(
        f"Book {answers['nights']} nights in {city} from {answers['date']}?", key, {"type": "boolean"}
    )


def trip_answer(key: str, answer: types.InputResponse | None) -> Any:
    """The value an answer gives step `key`; None when there is none to use (the step is asked again)."""
    if isinstance(answer, types.ElicitResult) and key not in ("hotel", "dinner"):
        record = {
            "key": key,
            "action": answer.action,
            **({"content": answer.content} if answer.content else {}),
        }
        append_event("answer " + json.dumps(record, sort_keys=True))
        return (answer.content or {}).get(key) if answer.action == "accept" else DECLINED
    if isinstance(answer, types.CreateMessageResult) and key in ("hotel", "dinner"):
        text = answer.content.text.strip() if isinstance(answer.content, types.TextContent) else ""
        append_event(
            "answer " + json.dumps({"key": key, "model": answer.model, "text": text}, sort_keys=True)
        )
        return text or None
    return None


DECLINED = object()  # the person declined or cancelled a form


def trip_step(
    city: str, answers: dict[str, Any], responses: Mapping[str, types.InputResponse]
) -> NeedInput | types.CallToolResult:
    """Take the answer to the step under way (if any), then ask the next step or give the result."""
    key = TRIP_KEYS[len(answers)]
    if key in responses:
        value = trip_answer(key, responses[key])
        if value is DECLINED:
            return text_result(f"trip declined at {key}")
        if value is not None:
            answers = {**answers, key: value}
    if len(answers) < len(TRIP_KEYS):
        key = TRIP_KEYS[len(answers)]
        return NeedInput(
            {key: trip_question(city, key, answers)}, {"tool": "trip", "city": city, "answers": answers}
        )
    if answers["confirm"] is not True:
        return text_result("trip not booked")
    return text_result(
        f"trip to {city} on {answers['date']}: {answers['nights']} nights at {answers['hotel']}, "
        f"dinner at {answers['dinner']}"
    )


def trip_state(blob: str, city: str) -> dict[str, Any]:
    """The answers so far that a trip's requestState holds (INVALID_PARAMS: not a trip's for `city`)."""
    try:
        state = json.loads(base64.urlsafe_b64decode(blob.encode()))
    except (binascii.Error, ValueError) as exc:
        raise MCPError(types.INVALID_PARAMS, f"Invalid requestState: {exc}") from exc
    if (
        not isinstance(state, dict)
        or state.get("tool") != "trip"
        or not isinstance(state.get("answers"), dict)
    ):
        raise MCPError(types.INVALID_PARAMS, "Invalid requestState: not a trip's")
    if state.get("city") != city or len(state["answers"]) >= len(TRIP_KEYS):
        raise MCPError(types.INVALID_PARAMS, "Invalid requestState: it belongs to another trip")
    return dict(state["answers"])


async def trip(ctx: ServerRequestContext, params: types.CallToolRequestParams, city: str) -> ToolReply:
    """Each era's way to ask, as for `book`: one round per tools/call, or requests inside one call."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answers = trip_state(params.request_state, city) if params.request_state else {}
        step = trip_step(city, answers, params.input_responses or {})
        if isinstance(step, NeedInput):
            return types.InputRequiredResult(
                input_requests=step.requests, request_state=encode_state(step.state)
            )
        return step
    return await ask_over_session(
        ctx, lambda state, responses: trip_step(city, (state or {}).get("answers", {}), responses)
    )


# --------------------------------------------------------------------------- the two eras


def missing_capability(ctx: ServerRequestContext, tool: str) -> str | None:
    caps = ctx.session.client_capabilities
    if not (caps and caps.elicitation):
        return f"{tool} needs a client that supports elicitation"
    if not caps.sampling:
        return f"{tool} needs a client that supports sampling"
    return None


def book_modern(
    params: types.CallToolRequestParams, city: str
) -> types.CallToolResult | types.InputRequiredResult:
    """2026-07-28: one round per tools/call; the questions go back as the result."""
    state = decode_state(params.request_state, city) if params.request_state else None
    step = book_step(city, state, params.input_responses or {})
    if isinstance(step, NeedInput):
        return types.InputRequiredResult(input_requests=step.requests, request_state=encode_state(step.state))
    return step


async def book_handshake(ctx: ServerRequestContext, city: str) -> types.CallToolResult:
    """Handshake era: run every round inside this call, asking the client over the session."""
    return await ask_over_session(ctx, lambda state, responses: book_step(city, state, responses))


# A tool's next round, from its state (None at first) and the answers to the round before.
Step = Callable[
    [dict[str, Any] | None, Mapping[str, types.InputResponse]], "NeedInput | types.CallToolResult"
]


async def ask_over_session(ctx: ServerRequestContext, step_of: Step) -> types.CallToolResult:
    """Handshake era: run every round of a tool inside this call, asking the client over the
    session; `step_of(state, answers)` is the tool's next round."""
    state: dict[str, Any] | None = None
    responses: dict[str, types.InputResponse] = {}
    # Ties each request to our tools/call (it matters for HTTP routing, harmless on stdio).
    related = ServerMessageMetadata(related_request_id=ctx.request_id)
    while not isinstance(step := step_of(state, responses), types.CallToolResult):
        responses = {}
        for key, request in step.requests.items():
            result_type = (
                types.ElicitResult if isinstance(request, types.ElicitRequest) else types.CreateMessageResult
            )
            try:
                # No timeout on purpose: a human (or a parked proxy) may take minutes to answer.
                responses[key] = await ctx.session.send_request(request, result_type, metadata=related)
            except MCPError as exc:
                return text_result(f"{request.method} failed: {exc.message}", is_error=True)
        state = step.state
    return step


async def on_list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[BOOK, TRIP])


async def on_call_tool(ctx: ServerRequestContext, params: types.CallToolRequestParams) -> ToolReply:
    if params.name not in (BOOK.name, TRIP.name):
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
    city = (params.arguments or {}).get("city")
    # The low-level Server does not validate arguments, so check the one we use.
    if not isinstance(city, str) or not city:
        return text_result(
            f"invalid arguments for {params.name}: 'city' must be a non-empty string", is_error=True
        )
    if reason := missing_capability(ctx, params.name):
        return text_result(reason, is_error=True)
    if params.name == TRIP.name:
        return await trip(ctx, params, city)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return book_modern(params, city)
    return await book_handshake(ctx, city)


server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: a booking tool that asks questions in rounds.",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
)


if __name__ == "__main__":
    serve(server)
