"""The meta-tools: their schemas (written for a model to read) and thin handlers.

Each handler takes the validated arguments, calls one method of the services and returns either a JSON
payload (our own answer) or a `CallToolResult` (a backend's answer, passed through).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from emceepee_cli.config import ServerSpec
from emceepee_cli.core.answers import sampling_answer
from emceepee_cli.core.calls import Relay
from emceepee_cli.core.heard import LOG_LEVELS
from emceepee_cli.core.wiring import Services
from emceepee_cli.errors import UsageError
from emceepee_cli.server.envelope import Reply
from emceepee_cli.store.records import TaskStatus

Payload = dict[str, Any] | Reply | types.CallToolResult


@dataclass(frozen=True)
class Call:
    """What a handler may use of the upstream request besides its arguments."""

    relay: Relay | None = None  # set when the host asked for progress (sent a progressToken)


Handler = Callable[[Services, dict[str, Any], Call], Awaitable[Payload]]


@dataclass(frozen=True)
class MetaTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    read_only: bool

    def as_tool(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input_schema,
            annotations=types.ToolAnnotations(read_only_hint=self.read_only),
        )


TOOLS: dict[str, MetaTool] = {}

STR = {"type": "string"}
SERVER = {"type": "string", "description": "A server name, as shown by list_servers."}
SERVER_FILTER = {"type": "string", "description": "Only this server (default: all servers)."}
STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}


def meta_tool(
    name: str,
    description: str,
    properties: dict[str, Any],
    required: tuple[str, ...] = (),
    *,
    read_only: bool = True,
) -> Callable[[Handler], Handler]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)

    def register(handler: Handler) -> Handler:
        TOOLS[name] = MetaTool(name, description, schema, handler, read_only)
        return handler

    return register


@meta_tool(
    "list_servers",
    "List the backend MCP servers emceepee manages, with each one's status (starting, ready, failed, "
    "restarting, stopped, disabled), transport, tool count, restarts and last error. Call this first.",
    {},
)
async def list_servers(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return services.servers.list_servers()


@meta_tool(
    "add_server",
    "Start a new backend MCP server: either a local command (stdio) or a remote `url` (Streamable HTTP). "
    "With persist=true (the default) it is also saved to emceepee's config so it starts next time. "
    "Values in env and headers may reference environment variables as ${VAR}.",
    {
        "name": {
            "type": "string",
            "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$",
            "description": "Name for the server.",
        },
        "command": {"type": "string", "description": "Executable to run, e.g. 'uvx' or 'npx'."},
        "args": {"type": "array", "items": STR, "description": "Arguments for the command."},
        "env": {**STR_MAP, "description": "Extra environment variables for the command."},
        "cwd": {"type": "string", "description": "Working directory for the command."},
        "url": {"type": "string", "description": "URL of a remote Streamable HTTP MCP server."},
        "headers": {**STR_MAP, "description": "HTTP headers for a remote server."},
        "persist": {
            "type": "boolean",
            "default": True,
            "description": "Save to the config file (default true).",
        },
    },
    ("name",),
    read_only=False,
)
async def add_server(services: Services, args: dict[str, Any], call: Call) -> Payload:
    if ("command" in args) == ("url" in args):
        raise UsageError("Give exactly one of `command` (a local server) or `url` (a remote one).")
    spec = ServerSpec(
        name=args["name"],
        command=args.get("command"),
        args=tuple(args.get("args", ())),
        env=dict(args.get("env", {})),
        cwd=args.get("cwd"),
        url=args.get("url"),
        headers=dict(args.get("headers", {})),
    )
    return await services.servers.add_server(spec, persist=args.get("persist", True))


@meta_tool(
    "remove_server",
    "Stop a backend server and remove it from emceepee's config.",
    {"name": SERVER},
    ("name",),
    read_only=False,
)
async def remove_server(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.servers.remove_server(args["name"])


@meta_tool(
    "list_tools",
    "List the tools of the backend servers (name, description, input schema), grouped by server. "
    "Call a tool with execute_tool.",
    {
        "server": SERVER_FILTER,
        "pattern": {
            "type": "string",
            "description": "Case-insensitive regular expression matched against tool names and descriptions.",
        },
    },
)
async def list_tools(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.servers.list_tools(args.get("server"), args.get("pattern"))


@meta_tool(
    "execute_tool",
    "Call a tool on a backend server. `args` are checked against the tool's input schema first. "
    "If the tool finishes within timeout_ms, its own result is returned unchanged. If not, the call keeps "
    "running as a task and you get {proxy_task, pending_on_server} at once: fetch the result later with "
    "get_task_result(task_id), or wait for it with await_activity.",
    {
        "server": SERVER,
        "tool": {"type": "string", "description": "The tool's name, as shown by list_tools."},
        "args": {"type": "object", "description": "Arguments for the tool, matching its input schema."},
        "timeout_ms": {
            "type": "integer",
            "minimum": 0,
            "description": "How long to wait before the call becomes a task (default from the config, 45000).",
        },
    },
    ("server", "tool"),
    read_only=False,
)
async def execute_tool(services: Services, args: dict[str, Any], call: Call) -> Payload:
    out = await services.servers.execute_tool(
        args["server"], args["tool"], args.get("args"), args.get("timeout_ms"), call.relay
    )
    if isinstance(out, dict):
        task = out["proxy_task"]
        name = f"{task['server']}.{task['tool']}"
        if "saga" in out:
            return Reply(
                out,
                f"{name} is waiting for an answer to a question, so it became task {task['task_id']}. "
                "Answer with respond_to_elicitation / respond_to_sampling (or resume_tool), "
                "then get_task_result.",
            )
        return Reply(
            out,
            f"{name} is still running, so it became task {task['task_id']}. "
            "Use get_task_result to get its result when ready (or await_activity to wait for it).",
        )
    return out


TASK_ID = {"type": "string", "description": "A task id (or a unique prefix of one)."}
WAIT_MS = {"type": "integer", "minimum": 0}


@meta_tool(
    "list_tasks",
    "List tasks (tool calls that outlived their execute_tool wait). By default only those still working.",
    {
        "server": SERVER_FILTER,
        "status": {
            "type": "string",
            "enum": [s.value for s in TaskStatus],
            "description": "Only tasks in this state.",
        },
        "include_completed": {
            "type": "boolean",
            "default": False,
            "description": "Also list finished tasks.",
        },
    },
)
async def list_tasks(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.tasks.list_tasks(
        args.get("server"), args.get("status"), args.get("include_completed", False)
    )


@meta_tool(
    "get_task",
    "Show one task's state, with the questions pending on its server.",
    {"task_id": TASK_ID},
    ("task_id",),
)
async def get_task(services: Services, args: dict[str, Any], call: Call) -> Payload:
    task = await services.tasks.get_json(args["task_id"])
    return {
        "task": task,
        "pending_elicitations_for_server": services.questions.for_server(task["server"])[
            "elicitations_for_server"
        ],
        **services.tasks.saga(task["task_id"]),
    }


@meta_tool(
    "get_task_result",
    "Get a task's result: the backend's own result once completed (waiting up to timeout_ms, capped below the "
    "host's timeout, while it works); the task itself if still working; an error saying why if it failed, was "
    "cancelled, expired or was interrupted.",
    {
        "task_id": TASK_ID,
        "timeout_ms": {
            **WAIT_MS,
            "description": "How long to wait for a working task (default: the cap, 50000).",
        },
    },
    ("task_id",),
)
async def get_task_result(services: Services, args: dict[str, Any], call: Call) -> Payload:
    out = await services.tasks.result(args["task_id"], args.get("timeout_ms"), call.relay)
    if isinstance(out, dict):
        return Reply(
            out, f"Task {out['task']['task_id']} is still working; ask again later or await_activity."
        )
    return out


@meta_tool(
    "cancel_task",
    "Cancel a working task: the backend call is cancelled for real.",
    {"task_id": TASK_ID},
    ("task_id",),
    read_only=False,
)
async def cancel_task(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.tasks.cancel(args["task_id"])


@meta_tool(
    "await_activity",
    "Wait until something happens (a task finishes, a backend connects, dies or changes its lists, a question "
    "arrives) or timeout_ms passes; returns at once if events are waiting. Returns triggers, events, the tasks "
    "still working (pending_server) and the questions awaiting an answer (pending_client).",
    {
        "timeout_ms": {
            **WAIT_MS,
            "default": 30000,
            "description": "Longest wait (default 30000; capped below the host's timeout).",
        }
    },
)
async def await_activity(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.await_activity(args.get("timeout_ms", 30000))


@meta_tool(
    "list_resources",
    "List the resources and resource templates the backend servers offer, grouped by server.",
    {"server": SERVER_FILTER},
)
async def list_resources(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.servers.list_resources(args.get("server"))


@meta_tool(
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


@meta_tool(
    "list_prompts",
    "List the prompts the backend servers offer, with their arguments, grouped by server.",
    {"server": SERVER_FILTER},
)
async def list_prompts(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return await services.servers.list_prompts(args.get("server"))


@meta_tool(
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
    return await services.servers.get_prompt(args["server"], args["name"], args.get("arguments"))


REQUEST_ID = {"type": "string", "description": "The request_id (or a unique prefix of it)."}


@meta_tool(
    "get_elicitations",
    "List the questions backend servers are waiting on the user for (elicitations): message, the schema of the "
    "expected answer (or a URL to open), server and task. Answer with respond_to_elicitation.",
    {"server": SERVER_FILTER},
)
async def get_elicitations(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return {"elicitations": services.questions.listed("elicitation", args.get("server"))}


@meta_tool(
    "respond_to_elicitation",
    "Answer a backend's question. action 'accept' with `content` matching the question's requested_schema "
    "(checked; a wrong field is named and the question stays open), or 'decline' / 'cancel'. Ask the user "
    "unless the answer is already known from the conversation.",
    {
        "request_id": REQUEST_ID,
        "action": {"type": "string", "enum": ["accept", "decline", "cancel"]},
        "content": {
            "type": "object",
            "description": "The answer's fields, for action 'accept' (form questions).",
        },
    },
    ("request_id", "action"),
    read_only=False,
)
async def respond_to_elicitation(services: Services, args: dict[str, Any], call: Call) -> Payload:
    answer: dict[str, Any] = {"action": args["action"]}
    if args["action"] == "accept":
        answer["content"] = args.get("content") or {}
    return {
        "answered": await services.questions.answer(
            args["request_id"], answer, by="model", kind="elicitation"
        )
    }


@meta_tool(
    "get_sampling_requests",
    "List the LLM completions backend servers are waiting for (sampling requests), with their messages. "
    "You may answer them yourself with respond_to_sampling.",
    {"server": SERVER_FILTER},
)
async def get_sampling_requests(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return {"sampling_requests": services.questions.listed("sampling", args.get("server"))}


@meta_tool(
    "respond_to_sampling",
    "Answer a backend's sampling request with the completion text (you are the LLM it asked for).",
    {
        "request_id": REQUEST_ID,
        "content": {"type": "string", "description": "The completion's text."},
        "model": {"type": "string", "description": "The model that wrote it (default 'unknown')."},
        "stop_reason": {"type": "string", "description": "e.g. endTurn, stopSequence, maxTokens."},
    },
    ("request_id", "content"),
    read_only=False,
)
async def respond_to_sampling(services: Services, args: dict[str, Any], call: Call) -> Payload:
    answer = sampling_answer(args["content"], args.get("model"), args.get("stop_reason"))
    return {
        "answered": await services.questions.answer(args["request_id"], answer, by="model", kind="sampling")
    }


@meta_tool(
    "resume_tool",
    "Resume a suspended tool call (a task shown with a `saga`): give the saga_token and an answer for its steps "
    "— for an elicitation step `result` is {action, content} (or just the content, meaning accept); for a "
    "sampling step, the completion text; `error` instead refuses the step. Waits (capped) for the next "
    "suspension or the result.",
    {
        "saga_token": {"type": "string", "description": "The saga_token, exactly as given."},
        "completed_steps": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"step_id": {"type": "string"}, "result": {}, "error": {"type": "string"}},
                "required": ["step_id"],
                "additionalProperties": False,
            },
        },
    },
    ("saga_token", "completed_steps"),
    read_only=False,
)
async def resume_tool(services: Services, args: dict[str, Any], call: Call) -> Payload:
    out = await services.tasks.resume(args["saga_token"], args["completed_steps"], call.relay)
    if isinstance(out, dict):
        state = "suspended again" if "saga" in out else "still working"
        return Reply(out, f"Task {out['task']['task_id']} is {state}.")
    return out


LIMIT = {"type": "integer", "minimum": 1, "maximum": 1000}


@meta_tool(
    "get_notifications",
    "Show the notifications backend servers sent (list changes, resource updates…), oldest first.",
    {
        "server": SERVER_FILTER,
        "limit": {**LIMIT, "default": 50, "description": "At most this many, newest kept (default 50)."},
    },
)
async def get_notifications(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return services.servers.get_notifications(args.get("server"), args.get("limit", 50))


@meta_tool(
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
