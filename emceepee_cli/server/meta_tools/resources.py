"""Meta-tools for what backends offer besides tools: resources and prompts."""

from __future__ import annotations

from typing import Any

import mcp_types as types

from emceepee_cli.server.meta_tools.registry import SERVER, SERVER_FILTER, STR_MAP, Call, Group, Payload
from emceepee_cli.session.wiring import Services

group = Group()


@group.tool(
    "list_resources",
    "List the resources and resource templates the backend servers offer, grouped by server.",
    {"server": SERVER_FILTER},
)
async def list_resources(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.servers.list_resources(args.get("server"))


@group.tool(
    "read_resource",
    "Read one resource from a backend server by its URI (a listed URI, or one made from a template).",
    {"server": SERVER, "uri": {"type": "string", "description": "The resource URI."}},
    ("server", "uri"),
)
async def read_resource(services: Services, args: dict[str, Any], call: Call) -> Payload:
    result = await services.servers.read_resource(args["server"], args["uri"])
    return types.CallToolResult(
        content=[types.EmbeddedResource(type="resource", resource=c) for c in result.contents]
    )


@group.tool(
    "list_prompts",
    "List the prompts the backend servers offer, with their arguments, grouped by server.",
    {"server": SERVER_FILTER},
)
async def list_prompts(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.servers.list_prompts(args.get("server"))


@group.tool(
    "get_prompt",
    "Get a prompt from a backend server, filled in with its arguments.",
    {
        "server": SERVER,
        "name": {"type": "string", "description": "The prompt's name, as shown by list_prompts."},
        "arguments": {**STR_MAP, "description": "The prompt's arguments (string values)."},
    },
    ("server", "name"),
)
async def get_prompt(services: Services, args: dict[str, Any], call: Call) -> Payload:
    """The backend's prompt as it is, in the protocol's own names (`mimeType`, `_meta`), as the
    host's native prompts/get passes it: a prompt is the backend's MCP object, not emceepee's JSON."""
    prompt = await services.servers.get_prompt(args["server"], args["name"], args.get("arguments"))
    out: dict[str, Any] = prompt.model_dump(by_alias=True, mode="json", exclude_none=True)
    out.pop("resultType", None)  # the SDK's marker of a complete result, not part of the prompt
    return out
