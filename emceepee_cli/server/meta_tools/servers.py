"""Meta-tools for the backend servers and their tools: list, add, remove, list tools, call one."""

from __future__ import annotations

from typing import Any

from emceepee_cli.calls.call import ProxyTask
from emceepee_cli.config import ServerSpec
from emceepee_cli.errors import UsageError
from emceepee_cli.server.envelope import Reply
from emceepee_cli.server.meta_tools.registry import SERVER, SERVER_FILTER, STR, STR_MAP, Call, Group, Payload
from emceepee_cli.session.wiring import Services

group = Group()

GATED = (
    "It changes which programs run on the user's computer, so unless the user's config allows it, a "
    "person must approve it first (in their MCP client, or with `emceepee answer ID` in a terminal); "
    "you cannot approve it yourself. Without an answer within timeout_ms you get the approval's "
    "request_id and the change is made once a person approves (a server_change event says so)."
)
CHANGE_TIMEOUT = {
    "type": "integer",
    "minimum": 0,
    "description": "How long to wait for the approval before answering (default from the config, 45000).",
}


@group.tool(
    "list_servers",
    "List the backend MCP servers emceepee manages, with each one's status (starting, ready, failed, "
    "restarting, stopped, disabled), transport, tool count, restarts and last error. Call this first.",
    {},
)
async def list_servers(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return services.servers.list_servers()


@group.tool(
    "add_server",
    "Start a new backend MCP server: either a local command (stdio) or a remote `url` (Streamable HTTP). "
    "With persist=true (the default) it is also saved to emceepee's config so it starts next time. "
    "Values in env and headers may reference environment variables as ${VAR}. " + GATED,
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
        "timeout_ms": CHANGE_TIMEOUT,
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
    out = await services.changes.add(spec, args.get("persist", True), args.get("timeout_ms"), call.relay)
    return gated(out)


@group.tool(
    "remove_server",
    "Stop a backend server and remove it from emceepee's config. " + GATED,
    {"name": SERVER, "timeout_ms": CHANGE_TIMEOUT},
    ("name",),
    read_only=False,
)
async def remove_server(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return gated(await services.changes.remove(args["name"], args.get("timeout_ms"), call.relay))


def gated(out: dict[str, Any]) -> Payload:
    """A change that was made is its own result; one that was not says why and what comes next."""
    if out.get("done") is not False:
        return out
    change, name, approval = out["change"], out["server"], out["approval"]
    request_id, status = approval["request_id"], approval["status"]
    if status == "pending":
        return Reply(
            out,
            f"{change}('{name}') waits for a person's approval (request {request_id}): the user approves "
            f"it in their MCP client, or in a terminal with `emceepee answer {request_id}`; you cannot "
            "approve it. It is made once approved (a server_change event says so); nothing was started, "
            "stopped or written yet.",
        )
    who = f" by {approval['answered_by']}" if approval.get("answered_by") else ""
    return Reply(
        out,
        f"{change}('{name}') was not done: its approval was {status}{who}. "
        "Nothing was started, stopped or written.",
    )


@group.tool(
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


@group.tool(
    "execute_tool",
    "Call a tool on a backend server. `args` are checked against the tool's input schema first. "
    "If the tool finishes within timeout_ms (waiting for a backend that is still starting included), its "
    "own result is returned unchanged. If not, the call keeps "
    "running as a task and you get {proxy_task, pending_on_server} at once: fetch the result later with "
    "get_task_result(task_id), or wait for it with await_activity. A result that suggests a next tool is "
    "followed (a tool_chain block lists the steps); one carrying a resume token shows it in a resumable "
    "block. Some tools need the user's approval first (a pending elicitation).",
    {
        "server": SERVER,
        "tool": {"type": "string", "description": "The tool's name, as shown by list_tools."},
        "args": {"type": "object", "description": "Arguments for the tool, matching its input schema."},
        "timeout_ms": {
            "type": "integer",
            "minimum": 0,
            "description": "How long to wait before the call becomes a task "
            "(default from the config, 45000).",
        },
        "follow_next_tool": {
            "type": "boolean",
            "description": "Call the tool a result suggests next (its _meta.nextTool) on the same server "
            "(default from the config: true). Off, the suggestion is shown to you instead.",
        },
        "auto_resume": {
            "type": "boolean",
            "description": "Re-issue the call while its result carries a resume token, and return the last "
            "result (default from the config: false, which shows you the token instead).",
        },
        "resume_token": {
            "type": "string",
            "description": "A resume_token from an earlier result: a backend's (the same call is re-issued "
            "with it, for the next part) or a task's own (its result is waited for; nothing is called).",
        },
    },
    ("server", "tool"),
    read_only=False,
)
async def execute_tool(services: Services, args: dict[str, Any], call: Call) -> Payload:
    out = await services.servers.execute_tool(
        args["server"],
        args["tool"],
        args.get("args"),
        args.get("timeout_ms"),
        call.relay,
        follow_next_tool=args.get("follow_next_tool"),
        auto_resume=args.get("auto_resume"),
        resume_token=args.get("resume_token"),
        fast=call.fast,
        asks=call.asks,
        retry=call.retry,
    )
    if isinstance(out, ProxyTask):
        return Reply(out.payload(), _became_task(out))
    return out


def _became_task(out: ProxyTask) -> str:
    """What execute_tool's answer says first when the call became a task: why, and what to do."""
    task = out.task
    name = f"{task['server']}.{task['tool']}"
    if out.saga is not None:
        return (
            f"{name} is waiting for an answer to a question, so it became task {task['task_id']}. "
            "Answer with respond_to_elicitation / respond_to_sampling (or resume_tool), "
            "then get_task_result."
        )
    pending = out.pending_on_server
    asked = [*pending.get("elicitations_for_server", []), *pending.get("sampling_requests_for_server", [])]
    if any("task_id" not in q for q in asked):
        # Several calls were in flight when a question came, so it is tied to none: it may be this one's.
        return (
            f"{name} became task {task['task_id']} while '{task['server']}' waits for an answer to a "
            "question (perhaps this call's). Answer it with respond_to_elicitation / "
            "respond_to_sampling, then get_task_result."
        )
    if task.get("status_message", "").startswith("waiting for backend"):
        return (
            f"'{task['server']}' is still starting, so {name} became task {task['task_id']}; it runs "
            "once the backend is up. Use get_task_result to get its result when ready (or "
            "await_activity to wait for it)."
        )
    return (
        f"{name} is still running, so it became task {task['task_id']}. "
        "Use get_task_result to get its result when ready (or await_activity to wait for it); "
        "execute_tool with the same server, tool, args and its resume_token works too."
    )
