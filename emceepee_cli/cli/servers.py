"""`emceepee servers …`: read and edit the backends in the config file."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from emceepee_cli import config as config_mod
from emceepee_cli import paths
from emceepee_cli.cli import render
from emceepee_cli.cli.options import ConfigOpt, JsonOpt
from emceepee_cli.config import ServerSpec
from emceepee_cli.errors import UsageError

app = typer.Typer(help="List, add and remove backend servers in the config.", no_args_is_help=True)


def server_row(spec: ServerSpec) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": spec.name,
        "transport": spec.transport,
        "enabled": spec.enabled,
        "protocol": spec.protocol,
    }
    if spec.url is not None:
        row["url"] = spec.url
    else:
        row["command"] = spec.command
        row["args"] = list(spec.args)
    return row


@app.command("list")
def list_(config: ConfigOpt = None, json: JsonOpt = False) -> None:
    """List the servers in the config."""
    loaded = config_mod.load_config(paths.config_path(config))
    rows = [server_row(spec) for spec in loaded.servers.values()]
    problems = [str(p) for p in loaded.problems]
    if json:
        render.as_json({"servers": rows, "config_problems": problems, "config": str(loaded.path)})
        return
    render.table(
        f"Servers in {loaded.path}",
        ("name", "transport", "target", "enabled", "protocol"),
        (
            (
                r["name"],
                r["transport"],
                r.get("url") or " ".join([r["command"], *r["args"]]),
                r["enabled"],
                r["protocol"],
            )
            for r in rows
        ),
        empty=f"No servers in {loaded.path}. Add one with: emceepee servers add NAME -- COMMAND [ARGS…]",
    )
    for problem in problems:
        render.warn(problem)


@app.command("add", context_settings={"ignore_unknown_options": True})
def add(
    name: Annotated[str, typer.Argument(help="Name for the server.")],
    command: Annotated[
        list[str] | None, typer.Argument(help="After `--`: the command and its arguments.")
    ] = None,
    url: Annotated[str | None, typer.Option(help="URL of a remote Streamable HTTP server.")] = None,
    env: Annotated[
        list[str] | None, typer.Option("--env", "-e", help="K=V for the server's environment; repeatable.")
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", "-H", help="K=V HTTP header; repeatable.")
    ] = None,
    cwd: Annotated[str | None, typer.Option(help="Working directory for the command.")] = None,
    protocol: Annotated[str, typer.Option(help="legacy (default), modern or auto.")] = "legacy",
    replace: Annotated[bool, typer.Option(help="Replace a server of the same name.")] = False,
    config: ConfigOpt = None,
) -> None:
    """Add a server: `emceepee servers add git -- uvx mcp-server-git` or `--url https://…`."""
    if bool(command) == bool(url):
        raise UsageError(
            "Give either a command after `--` or --url, not both and not neither.",
            hint="Example: emceepee servers add git -- uvx mcp-server-git --repository ~/src/app",
        )
    spec = ServerSpec(
        name=name,
        command=command[0] if command else None,
        args=tuple(command[1:]) if command else (),
        env=config_mod.parse_env_pairs(env or []),
        headers=config_mod.parse_env_pairs(header or []),
        cwd=cwd,
        url=url,
        protocol=protocol,  # type: ignore[arg-type]  # validated by add_server
    )
    path = config_mod.add_server(spec, paths.config_path(config), replace=replace)
    render.line(f"Added '{name}' to {path}. A running `emceepee serve` picks it up on its next start.")


@app.command("remove")
def remove(
    name: Annotated[str, typer.Argument(help="The server to remove.")], config: ConfigOpt = None
) -> None:
    """Remove a server from the config."""
    path = config_mod.remove_server(name, paths.config_path(config))
    render.line(f"Removed '{name}' from {path}.")
