"""Meta-tools for what backends said: their notifications and their logs."""

from __future__ import annotations

from typing import Any

from emceepee_cli.backends.notifications import LOG_LEVELS
from emceepee_cli.server.meta_tools.registry import SERVER_FILTER, Call, Group, Payload
from emceepee_cli.session.wiring import Services

group = Group()

LIMIT = {"type": "integer", "minimum": 1, "maximum": 1000}


@group.tool(
    "get_notifications",
    "Show the notifications backend servers sent (list changes, resource updates…), oldest first.",
    {
        "server": SERVER_FILTER,
        "limit": {**LIMIT, "default": 50, "description": "At most this many, newest kept (default 50)."},
    },
)
async def get_notifications(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return services.servers.get_notifications(args.get("server"), args.get("limit", 50))


@group.tool(
    "get_logs",
    "Show what backend servers logged: their MCP log messages and their stderr lines, oldest first.",
    {
        "server": SERVER_FILTER,
        "level": {
            "type": "string",
            "enum": list(LOG_LEVELS),
            "description": "Minimum level (stderr lines count as info).",
        },
        "limit": {**LIMIT, "default": 100, "description": "At most this many, newest kept (default 100)."},
    },
)
async def get_logs(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return services.servers.get_logs(args.get("server"), args.get("level"), args.get("limit", 100))
