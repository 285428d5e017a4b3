"""`emceepee fleet`: the per-user process every host's `serve` relays to when the fleet is on.

`status` and `stop` talk to the fleet serving this config and journal over its socket
(emceepee_cli/rendezvous.py's `control`; fleet/control.py answers): neither ever starts one, and
with none running each says so and exits 0. `emceepee fleet run` (hidden) is what a front starts
(detached, with `--detach --ready-fd N`: fleet/starter.py); a person may run it in a terminal as
well, to watch its log.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from emceepee_cli.cli.framework.options import ConfigOpt, DbOpt, JsonOpt
from emceepee_cli.cli.terminal import render
from emceepee_cli.errors import EmceepeeError

if TYPE_CHECKING:
    from emceepee_cli.rendezvous import Place

ANSWER_S = 5.0  # a fleet answers a control request at once; a loaded machine is slow
STOP_S = 30.0  # a fleet ends its hosts' sessions within ~13 s (server/app.py's bounds), then exits
STOP_POLL_S = 0.05

app = typer.Typer(
    help="The per-user process every host's serve relays to when the fleet is on: its status, or stop it.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("status")
def status(config: ConfigOpt = None, db: DbOpt = None, json: JsonOpt = False) -> None:
    """Show the fleet serving this config: pid, version, uptime, socket, memory, the hosts
    connected, and the backends it runs with the hosts using each. With none running, say so
    (exit 0)."""
    config_path, where = _place(config, db)
    found = _ask(where, "status")
    if json:
        render.as_json({"fleet": found, "socket": str(where.sock), **_switch(config_path)})
    elif found is None:
        _none_runs(config_path)
    else:
        _show(found)


@app.command("stop")
def stop(config: ConfigOpt = None, db: DbOpt = None, json: JsonOpt = False) -> None:
    """Stop the fleet serving this config: its socket goes at once, each host's session ends (as
    on SIGTERM), and it exits; waits for that (at most 30 s). A host still connected sees its
    server end; a new fleet starts when its `emceepee serve` next connects. Exit 0 when stopped,
    or when none ran."""
    config_path, where = _place(config, db)
    before = _ask(where, "status")
    answer = _ask(where, "stop") if before is not None else None
    pid = answer.get("stopping") if answer is not None else None
    if isinstance(pid, int):
        _wait_gone(where, pid)
    hosts = len(before["hosts"]) if before is not None else 0
    if json:
        render.as_json({"stopped": pid, "hosts": hosts})
        return
    if not isinstance(pid, int):
        render.line(f"No fleet runs for this config ({config_path}); nothing to stop.")
        return
    render.line(f"Stopped the fleet (pid {pid}).")
    if hosts:
        render.line(
            f"{hosts} host(s) were connected: their requests in flight failed, and each host's "
            "emceepee serve starts a new fleet and carries on (their calls are in list_tasks)."
        )


@app.command("run", hidden=True)
def run(
    config: ConfigOpt = None,
    db: DbOpt = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging (to stderr).")] = False,
    ready_fd: Annotated[int | None, typer.Option("--ready-fd", hidden=True)] = None,
    detach: Annotated[bool, typer.Option("--detach", hidden=True)] = False,
) -> None:
    """Run the fleet in the foreground: one MCP session per host connecting to its socket, until no
    host has been connected for [fleet] idle_exit."""
    from emceepee_cli import paths
    from emceepee_cli.fleet import starter

    if detach:  # before anything heavy is loaded: the process a front started ends at once
        starter.detach()
    from emceepee_cli.fleet.daemon import run_fleet

    code = run_fleet(paths.config_path(config), paths.db_path(db), ready_fd=ready_fd, verbose=verbose)
    if code:
        raise typer.Exit(code)


def _place(config: Path | None, db: Path | None) -> tuple[Path, Place]:
    """The config and the place of its fleet, as a front serving it works them out."""
    from emceepee_cli import paths, rendezvous

    config_path = paths.config_path(config).absolute()
    return config_path, rendezvous.place(config_path, paths.db_path(db).absolute())


def _ask(where: Place, op: str) -> dict[str, Any] | None:
    """The fleet's answer to `op`; None when none runs. A fleet that cannot be asked is an error."""
    from emceepee_cli import rendezvous
    from emceepee_cli.fleet.starter import fleet_log

    try:
        return rendezvous.control(where, op, ANSWER_S)
    except rendezvous.Refused as exc:
        raise EmceepeeError(str(exc), hint=f"The fleet's log: {fleet_log()}") from None


def _wait_gone(where: Place, pid: int) -> None:
    """Until the fleet at `where` has exited (its live lock is free), at most `STOP_S`."""
    from emceepee_cli import rendezvous
    from emceepee_cli.fleet.starter import fleet_log

    deadline = time.monotonic() + STOP_S
    while rendezvous.alive(where):
        if time.monotonic() >= deadline:
            raise EmceepeeError(
                f"The fleet (pid {pid}) was asked to stop and is still running after {STOP_S:g} s.",
                hint=f"Its log: {fleet_log()}. To end it: kill {pid}",
            )
        time.sleep(STOP_POLL_S)


def _switch(config_path: Path) -> dict[str, Any]:
    """Whether the fleet is on for this config, and who said so ("the default" when nobody did)."""
    from emceepee_cli import rendezvous
    from emceepee_cli.config.load import fleet_settings

    on, said = rendezvous.switch(config_path, fleet_settings(config_path).enabled)
    return {"on": on, "said_by": said}


def _none_runs(config_path: Path) -> None:
    render.line(f"No fleet runs for this config ({config_path}).")
    switch = _switch(config_path)
    if switch["on"]:
        render.note(f"The fleet is on ({switch['said_by']}): a host's emceepee serve starts one.")
    else:
        render.note(f"The fleet is off ({switch['said_by']}): each emceepee serve runs in-process.")


def _show(found: dict[str, Any]) -> None:
    from emceepee_cli.clock import age

    labels = {host["session"]: _label(host) for host in found["hosts"]}
    render.fields(
        [
            ("fleet", f"pid {found['pid']}, emceepee {found['version']}"),
            ("uptime", f"{age(found['started'])} (since {found['started']})"),
            ("socket", found["socket"]),
            ("memory", f"{found['rss_mb']} MB (the fleet itself)"),
            ("idle exit", _idle_exit(float(found["idle_exit_s"]))),
            ("config", found["config"]),
            ("journal", found["db"]),
        ]
    )
    render.line()
    render.table(
        f"Hosts ({len(labels)})",
        ("session", "host", "front pid", "since", "cwd"),
        ((h["session"], labels[h["session"]], h["front_pid"], h["since"], h["cwd"]) for h in found["hosts"]),
        empty="No host is connected.",
    )
    render.line()
    render.table(
        "Backends",
        ("server", "key", "pid", "status", "memory", "used by"),
        (
            (
                b["server"],
                b["key"],
                b.get("pid"),
                b["status"],
                f"{b['rss_mb']} MB" if b.get("rss_mb") is not None else None,
                ", ".join(labels.get(s, s) for s in b["hosts"]),
            )
            for b in found["backends"]
        ),
        empty="No backend is listed.",
    )


def _label(host: dict[str, Any]) -> str:
    """A host as the backends' table names it: its name and the end of its session id."""
    client = host.get("client") or {}
    return f"{client.get('name') or 'a host'} ({host['session'][-6:]})"


def _idle_exit(seconds: float) -> str:
    if seconds == 0:
        return "0: it exits with its last host"
    for unit, size in (("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit} after its last host leaves"
    return f"{seconds:g}s after its last host leaves"
