"""Example backend "surface": prompts, resources and logging with the parts echo.py leaves out.

emceepee's tests spawn it as ``python examples/servers/surface.py``. It speaks MCP over stdio
(handshake era) and declares prompts {listChanged}, resources {subscribe, listChanged},
tools, logging and completions.

Prompts
    review(language, framework?)   one user message "Review this <language> code[ using <framework>]."
        completion/complete suggests languages for "language" (prefix match, ranked as listed)
        and, for "framework", the frameworks of context.arguments.language.
Resources
    surface://counter              text/plain, the counter's value; subscribable
    surface://notes/<name>         one per note added with add_note
    surface://notes/{name}         (template) a note by name; completion suggests note names
Tools
    bump(by=1)                     adds to the counter; subscribers of surface://counter get
                                   notifications/resources/updated
    log(level, message)            sends notifications/message at ``level`` (logger "surface") if it
                                   is at or above the level set by logging/setLevel (default
                                   "info"); returns "sent" or "filtered"
    add_note(name, text)           adds resource surface://notes/<name> and sends
                                   notifications/resources/list_changed
    add_prompt(name)               adds an argument-less prompt <name> and sends
                                   notifications/prompts/list_changed

If the environment variable EMCEEPEE_EXAMPLE_LOG names a file, the server appends:
    subscribed <uri> | unsubscribed <uri> | level <level> | updated <uri>

Everything diagnostic goes to stderr: stdout is the protocol wire.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, get_args

import mcp_types as types
from _example import ToolTable, append_event, serve, text_result, tool_table_handlers
from mcp import MCPError
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.uri_template import UriTemplate

NAME = "surface"
log = logging.getLogger(NAME)

# logging/setLevel, notifications/message and resources/subscribe are deprecated as of protocol
# 2026-07-28 but are exactly what a handshake-era backend uses; the warnings would be noise.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)  # least to most severe
COUNTER_URI = "surface://counter"
NOTE_TEMPLATE = UriTemplate.parse("surface://notes/{name}")
FRAMEWORKS = {
    "python": ["django", "fastapi", "flask"],
    "pytorch": ["lightning"],
    "rust": ["actix", "axum", "tokio"],
    "typescript": ["express", "nestjs", "react"],
}

# One process serves one stdio connection, so module-level state is per-client state.
counter = 0
level = "info"
subscribed: set[str] = set()
notes: dict[str, str] = {}
extra_prompts: list[str] = []


# --------------------------------------------------------------------------- tools


async def bump(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    global counter
    counter += args.get("by", 1)
    if COUNTER_URI in subscribed:
        append_event(f"updated {COUNTER_URI}")
        await ctx.session.send_resource_updated(COUNTER_URI)
    return text_result(str(counter), structured={"counter": counter})


async def log_tool(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    wanted: str = args["level"]
    if LEVELS.index(wanted) < LEVELS.index(level):
        return text_result("filtered")
    # The SDK leaves filtering by logging/setLevel to the server in the handshake era.
    await ctx.session.send_log_message(wanted, args["message"], logger=NAME)  # type: ignore[arg-type]
    return text_result("sent")


async def add_note(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    notes[args["name"]] = args["text"]
    await ctx.session.send_resource_list_changed()
    return text_result(NOTE_TEMPLATE.expand({"name": args["name"]}))


async def add_prompt(ctx: ServerRequestContext, args: dict[str, Any]) -> types.CallToolResult:
    if args["name"] not in extra_prompts and args["name"] != "review":
        extra_prompts.append(args["name"])
    await ctx.session.send_prompt_list_changed()
    return text_result(args["name"])


def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


TOOLS: ToolTable = {
    "bump": (
        types.Tool(
            name="bump",
            description="Add to the counter (surface://counter); subscribers are told.",
            input_schema=schema({"by": {"type": "integer", "default": 1}}, []),
        ),
        bump,
    ),
    "log": (
        types.Tool(
            name="log",
            description="Send a log message at a level, unless logging/setLevel filters it.",
            input_schema=schema(
                {"level": {"type": "string", "enum": list(LEVELS)}, "message": {"type": "string"}},
                ["level", "message"],
            ),
        ),
        log_tool,
    ),
    "add_note": (
        types.Tool(
            name="add_note",
            description="Add a note resource surface://notes/<name> (resources list changes).",
            input_schema=schema({"name": {"type": "string"}, "text": {"type": "string"}}, ["name", "text"]),
        ),
        add_note,
    ),
    "add_prompt": (
        types.Tool(
            name="add_prompt",
            description="Add an argument-less prompt (prompts list changes).",
            input_schema=schema({"name": {"type": "string"}}, ["name"]),
        ),
        add_prompt,
    ),
}

on_list_tools, on_call_tool = tool_table_handlers(TOOLS)


# --------------------------------------------------------------------------- prompts and completion

REVIEW = types.Prompt(
    name="review",
    description="Ask for a code review.",
    arguments=[
        types.PromptArgument(name="language", description="Programming language", required=True),
        types.PromptArgument(name="framework", description="Framework in use", required=False),
    ],
)


async def on_list_prompts(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    extra = [types.Prompt(name=name, description=f"Added at runtime: {name}") for name in extra_prompts]
    return types.ListPromptsResult(prompts=[REVIEW, *extra])


async def on_get_prompt(
    ctx: ServerRequestContext, params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    args = params.arguments or {}
    if params.name in extra_prompts:
        text = f"This is the {params.name} prompt."
    elif params.name == "review":
        if not args.get("language"):
            raise MCPError(types.INVALID_PARAMS, "Missing required argument: language")
        using = f" using {args['framework']}" if args.get("framework") else ""
        text = f"Review this {args['language']} code{using}."
    else:
        raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
    return types.GetPromptResult(
        messages=[types.PromptMessage(role="user", content=types.TextContent(text=text))]
    )


def suggestions(params: types.CompleteRequestParams) -> list[str]:
    ref, argument = params.ref, params.argument
    context = (params.context.arguments if params.context else None) or {}
    if isinstance(ref, types.PromptReference) and ref.name == "review":
        if argument.name == "language":
            choices = list(FRAMEWORKS)
        elif argument.name == "framework":
            choices = FRAMEWORKS.get(context.get("language", ""), [])
        else:
            raise MCPError(types.INVALID_PARAMS, f"Prompt review has no argument {argument.name!r}")
    elif isinstance(ref, types.ResourceTemplateReference) and ref.uri == "surface://notes/{name}":
        choices = sorted(notes)
    else:
        raise MCPError(types.INVALID_PARAMS, f"Nothing to complete for {ref.model_dump(exclude_none=True)}")
    return [choice for choice in choices if choice.startswith(argument.value)]


async def on_completion(
    ctx: ServerRequestContext, params: types.CompleteRequestParams
) -> types.CompleteResult:
    values = suggestions(params)
    return types.CompleteResult(
        completion=types.Completion(values=values[:100], total=len(values), has_more=False)
    )


# --------------------------------------------------------------------------- resources and logging


async def on_list_resources(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    counter_resource = types.Resource(uri=COUNTER_URI, name="counter", mime_type="text/plain")
    note_resources = [
        types.Resource(uri=NOTE_TEMPLATE.expand({"name": name}), name=f"note {name}", mime_type="text/plain")
        for name in notes
    ]
    return types.ListResourcesResult(resources=[counter_resource, *note_resources])


async def on_list_resource_templates(
    ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(
        uri_template="surface://notes/{name}",
        name="note",
        description="A note by name",
        mime_type="text/plain",
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def on_read_resource(
    ctx: ServerRequestContext, params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    if params.uri == COUNTER_URI:
        text = str(counter)
    elif (match := NOTE_TEMPLATE.match(params.uri)) is not None and match["name"] in notes:
        text = notes[match["name"]]
    else:
        raise MCPError(types.INVALID_PARAMS, f"Unknown resource: {params.uri}")
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=params.uri, mime_type="text/plain", text=text)]
    )


async def on_subscribe(ctx: ServerRequestContext, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscribed.add(params.uri)
    append_event(f"subscribed {params.uri}")
    return types.EmptyResult()


async def on_unsubscribe(
    ctx: ServerRequestContext, params: types.UnsubscribeRequestParams
) -> types.EmptyResult:
    subscribed.discard(params.uri)
    append_event(f"unsubscribed {params.uri}")
    return types.EmptyResult()


async def on_set_level(ctx: ServerRequestContext, params: types.SetLevelRequestParams) -> types.EmptyResult:
    global level
    level = params.level
    append_event(f"level {level}")
    return types.EmptyResult()


server = Server(
    NAME,
    version="0.1.0",
    instructions="Example backend for emceepee tests: completions, subscriptions, templates, log levels.",
    on_list_tools=on_list_tools,
    on_call_tool=on_call_tool,
    on_list_prompts=on_list_prompts,
    on_get_prompt=on_get_prompt,
    on_completion=on_completion,
    on_list_resources=on_list_resources,
    on_list_resource_templates=on_list_resource_templates,
    on_read_resource=on_read_resource,
    on_subscribe_resource=on_subscribe,
    on_unsubscribe_resource=on_unsubscribe,
    on_set_logging_level=on_set_level,
)


if __name__ == "__main__":
    serve(server, NotificationOptions(prompts_changed=True, resources_changed=True, tools_changed=False))
