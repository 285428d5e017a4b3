"""A backend whose prompt and resource ask the client two questions each before answering, in the
era the client negotiated: requests sent to the client (handshake era) or input rounds of the
request itself (2026-07-28, its state in the request_state it returns).

    python tests/backends/asking_native.py [SCHEME]     (SCHEME names its resource: SCHEME://profile)

    tool get_sum(a, b)     a + b, as text, at once
    prompt plan(city)      asks "Date in <city>?" (a form with a required `date`), then the client's
                           LLM "Hotel in <city> on <date>?"; one user message
                           "plan: <city> on <date> at <hotel>"
    resource ask://profile asks "Your name?" (a form with a required `name`), then the client's LLM
                           "Greet <name>"; the text "profile of <name>: <greeting>"

A declined form gives "declined" in place of the rest. Everything diagnostic goes to stderr;
stdout is the protocol wire.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

NUMBERS = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
PROFILE = f"{sys.argv[1] if len(sys.argv) > 1 else 'ask'}://profile"
Asked = types.ElicitRequest | types.CreateMessageRequest
Answers = dict[str, str]


def form(message: str, key: str) -> types.ElicitRequest:
    schema = {"type": "object", "properties": {key: {"type": "string"}}, "required": [key]}
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def llm(prompt: str) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=50)
    )


def plan_question(city: str, answers: Answers) -> tuple[str, Asked] | None:
    if "date" not in answers:
        return "date", form(f"Date in {city}?", "date")
    if "hotel" not in answers:
        return "hotel", llm(f"Hotel in {city} on {answers['date']}?")
    return None


def profile_question(answers: Answers) -> tuple[str, Asked] | None:
    if "name" not in answers:
        return "name", form("Your name?", "name")
    if "greeting" not in answers:
        return "greeting", llm(f"Greet {answers['name']}")
    return None


def value(key: str, answer: types.InputResponse) -> str:
    if isinstance(answer, types.ElicitResult):
        return str((answer.content or {}).get(key)) if answer.action == "accept" else "declined"
    if isinstance(answer, types.CreateMessageResult) and isinstance(answer.content, types.TextContent):
        return answer.content.text
    raise MCPError(types.INVALID_PARAMS, f"no usable answer to {key}")


async def answers_of(
    ctx: ServerRequestContext,
    params: types.GetPromptRequestParams | types.ReadResourceRequestParams,
    next_question: Any,
) -> Answers | types.InputRequiredResult:
    """Every answer, asked over the session (handshake era) or in rounds (2026-07-28)."""
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answers: Answers = json.loads(base64.b64decode(params.request_state)) if params.request_state else {}
        responses: Mapping[str, types.InputResponse] = params.input_responses or {}
        answers |= {key: value(key, answer) for key, answer in responses.items()}
        asked = next_question(answers)
        if asked is None or "declined" in answers.values():
            return answers
        state = base64.b64encode(json.dumps(answers).encode()).decode()
        return types.InputRequiredResult(input_requests={asked[0]: asked[1]}, request_state=state)
    answers = {}
    while (asked := next_question(answers)) is not None and "declined" not in answers.values():
        key, request = asked
        result_type = (
            types.ElicitResult if isinstance(request, types.ElicitRequest) else types.CreateMessageResult
        )
        answers[key] = value(key, await ctx.session.send_request(request, result_type))
    return answers


async def on_list_tools(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[types.Tool(name="get_sum", description="a + b", input_schema=NUMBERS)]
    )


async def on_call_tool(
    ctx: ServerRequestContext, params: types.CallToolRequestParams
) -> types.CallToolResult:
    args = params.arguments or {}
    return types.CallToolResult(content=[types.TextContent(text=str(args.get("a", 0) + args.get("b", 0)))])


async def on_list_prompts(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    city = types.PromptArgument(name="city", required=True)
    return types.ListPromptsResult(
        prompts=[types.Prompt(name="plan", description="asks two", arguments=[city])]
    )


async def on_get_prompt(
    ctx: ServerRequestContext, params: types.GetPromptRequestParams
) -> types.GetPromptResult | types.InputRequiredResult:
    city = (params.arguments or {}).get("city", "")
    answers = await answers_of(ctx, params, lambda a: plan_question(city, a))
    if isinstance(answers, types.InputRequiredResult):
        return answers
    said = (
        "declined" if "declined" in answers.values() else f"{city} on {answers['date']} at {answers['hotel']}"
    )
    message = types.PromptMessage(role="user", content=types.TextContent(text=f"plan: {said}"))
    return types.GetPromptResult(messages=[message])


async def on_list_resources(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri=PROFILE, name="profile")])


async def on_read_resource(
    ctx: ServerRequestContext, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult | types.InputRequiredResult:
    if str(params.uri) != PROFILE:
        raise MCPError(types.INVALID_PARAMS, f"no resource {params.uri}")
    answers = await answers_of(ctx, params, profile_question)
    if isinstance(answers, types.InputRequiredResult):
        return answers
    said = "declined" if "declined" in answers.values() else f"{answers['name']}: {answers['greeting']}"
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=PROFILE, text=f"profile of {said}")]
    )


server = Server(
    "asking_native",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
    on_list_prompts=on_list_prompts,
    on_get_prompt=on_get_prompt,
    on_list_resources=on_list_resources,
    on_read_resource=on_read_resource,
)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
