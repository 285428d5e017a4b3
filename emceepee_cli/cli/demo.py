"""`emceepee demo`: run the real `emceepee serve` against the example backends and narrate.

It drives the server exactly as an MCP host would (the SDK's client over stdio), in a throwaway
home folder, so it changes nothing of the user's own config or journal. The example backends
ship inside the package (`emceepee_cli/_examples` is `examples/servers`), so the demo works
wherever emceepee is installed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from emceepee_cli.cli.terminal import render
from emceepee_cli.errors import EmceepeeError

if TYPE_CHECKING:
    from mcp import Client

STEP_TIMEOUT_S = 30.0


PACKAGED = Path(__file__).resolve().parents[1] / "_examples"


def find_examples(explicit: Path | None) -> Path:
    candidate = explicit or PACKAGED
    if (candidate / "echo.py").is_file():
        return candidate
    raise EmceepeeError(
        f"The demo's example backends are not in {candidate}.",
        hint="Reinstall emceepee (they ship with it), or pass --examples PATH/TO/examples/servers.",
    )


def demo_config(examples: Path) -> str:
    python = json.dumps(sys.executable)
    lines = []
    for name, script in (
        ("echo", "echo.py"),
        ("many", "many_tools.py"),
        ("crashy", "crashy.py"),
        ("elicit", "elicit.py"),
    ):
        lines += [
            f"[servers.{name}]",
            f"command = {python}",
            f"args = [{json.dumps(str(examples / script))}]",
            "",
        ]
    lines += ["[servers.broken]", 'command = "emceepee-demo-no-such-command"', ""]
    return "\n".join(lines)


def serve_command() -> tuple[str, list[str]]:
    from emceepee_cli.hosts.catalog import serve_command as this_emceepee

    command = this_emceepee()
    return command[0], command[1:]


def demo(
    examples: Annotated[Path | None, typer.Option(help="Folder of the example backends.")] = None,
) -> None:
    """Watch emceepee work on its example backends.

    Starts the real `emceepee serve` on the example backends and calls through it, as a host
    would, in a throwaway folder.
    """
    import anyio

    found = find_examples(examples)
    with tempfile.TemporaryDirectory(prefix="emceepee-demo-") as home:
        config = Path(home) / "config.toml"
        config.write_text(demo_config(found))
        anyio.run(_drive, config, home)


def _structured(result: Any) -> dict[str, Any]:
    return result.structured_content or {}


def _text(result: Any) -> str:
    """The result's own blocks; the envelope (events, pending questions) summed up in brackets."""
    shown, extra = [], []
    for block in result.content:
        if getattr(block, "type", "") == "resource":
            shown.append(getattr(block.resource, "text", "<binary resource>").strip())
        elif getattr(block, "type", "") != "text":
            continue
        elif block.text.startswith('{"events_since_last_response"'):
            extra.append(
                "events: "
                + ", ".join(e["type"] for e in json.loads(block.text)["events_since_last_response"])
            )
        elif block.text.startswith('{"pending_client_action"'):
            extra.append("a question is pending")
        else:
            shown.append(block.text)
    return " ".join(shown) + "".join(f"  [{e}]" for e in extra)


async def _drive(config: Path, home: str) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command, args = serve_command()
    params = StdioServerParameters(
        command=command, args=[*args, "--config", str(config)], env={**os.environ, "EMCEEPEE_HOME": home}
    )
    render.line(f"$ {command} {' '.join(params.args)}", style="bold")
    log = Path(home) / "serve.log"  # serve's stderr: shown after the steps, not in their midst
    try:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
                await _steps(client)
    finally:
        warnings = [
            line
            for line in log.read_text(errors="replace").splitlines()
            if " WARNING " in line or " ERROR " in line
        ]
        if warnings:
            render.line("\nWhat serve logged meanwhile (its stderr, which a host keeps in its log):")
            for line in warnings:
                render.line(f"  {line}", style="dim")
    render.line("\nDone: `emceepee serve` stopped and took its backends with it.", style="bold green")


async def _steps(client: Client) -> None:
    import anyio

    async def step(title: str, tool: str, arguments: dict[str, Any]) -> Any:
        render.line(f"\n▶ {title}", style="bold cyan")
        render.line(f"  {tool}({json.dumps(arguments)})")
        with anyio.fail_after(STEP_TIMEOUT_S):
            result = await client.call_tool(tool, arguments)
        shown = _text(result)
        render.line(
            ("  ✗ " if result.is_error else "  ✓ ") + (shown if len(shown) < 400 else shown[:400] + " …")
        )
        return result

    tools = await client.list_tools()
    render.line(
        f"The host sees {len(tools.tools)} fixed meta-tools: {', '.join(t.name for t in tools.tools)}"
    )
    await step(
        "Which tools do the backends have? (waits briefly for backends still starting)",
        "list_tools",
        {"pattern": "echo|tool_30|crash"},
    )
    servers = _structured(await step("Servers and their status", "list_servers", {}))
    for row in servers.get("servers", []):
        render.line(
            f"    {row['name']:<8} {row['status']:<10} tools={row['tools']} {row.get('last_error', '')}"
        )
    await step(
        "Call a backend tool", "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "hi"}}
    )
    await step(
        "Structured results pass through untouched",
        "execute_tool",
        {"server": "echo", "tool": "add", "args": {"a": 2, "b": 3}},
    )
    await step(
        "Bad arguments are refused before reaching the backend",
        "execute_tool",
        {"server": "echo", "tool": "add", "args": {"a": "two"}},
    )
    await step(
        "The 30th tool of a paginated backend",
        "execute_tool",
        {"server": "many", "tool": "tool_30", "args": {"n": 30}},
    )
    await step(
        "A backend crashes mid-call: a clear error, not a hung host",
        "execute_tool",
        {"server": "crashy", "tool": "crash", "args": {}},
    )
    await step(
        "…and it is restarted: the next call works",
        "execute_tool",
        {"server": "crashy", "tool": "ok", "args": {}},
    )
    slow = _structured(
        await step(
            "A slow call becomes a task instead of hitting the host's timeout",
            "execute_tool",
            {"server": "echo", "tool": "slow", "args": {"seconds": 1.5, "steps": 3}, "timeout_ms": 300},
        )
    )
    task_id = slow["proxy_task"]["task_id"]
    await step("…and its result is fetched later", "get_task_result", {"task_id": task_id})
    asked = _structured(
        await step(
            "A backend asks the user a question: the host cannot show forms, so it is parked",
            "execute_tool",
            {"server": "elicit", "tool": "ask", "args": {"question": "Your name?"}},
        )
    )
    question = asked["saga"]["steps"][0]["step_id"]
    render.line(f"    (from another terminal you could run: emceepee answer {question[:10]})")
    await step(
        "The model answers it (checked against the question's schema)",
        "respond_to_elicitation",
        {"request_id": question, "action": "accept", "content": {"name": "Ada"}},
    )
    await step(
        "…and the backend's call completes with that answer",
        "get_task_result",
        {"task_id": asked["proxy_task"]["task_id"]},
    )
    await step("Resources pass through", "read_resource", {"server": "echo", "uri": "echo://readme"})
    await step("Prompts too", "get_prompt", {"server": "echo", "name": "greet", "arguments": {"name": "Ada"}})
