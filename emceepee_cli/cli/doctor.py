"""`emceepee doctor`: one line per check, the fix under each failure; exit 1 if any check failed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from emceepee_cli.cli.framework.options import ConfigOpt, DbOpt, JsonOpt
from emceepee_cli.cli.terminal import render

if TYPE_CHECKING:
    from emceepee_cli.hosts.doctor import Check

MARKS = {"ok": "ok  ", "fail": "FAIL", "note": "note"}
STYLES = {"ok": "green", "fail": "bold red", "note": None}


def doctor(
    config: ConfigOpt = None,
    db: DbOpt = None,
    wait: Annotated[float, typer.Option("--wait", help="Seconds to wait for each backend to start.")] = 30.0,
    no_backends: Annotated[bool, typer.Option("--no-backends", help="Do not start the backends.")] = False,
    json: JsonOpt = False,
) -> None:
    """Check the config, the journal, the install key, every backend, every host and the fleet.

    Each backend is started the way an MCP host starts it (the small environment a host gives
    emceepee: a short PATH, and the "env" block of emceepee's entry in the host's config), so a
    server that works only in this shell fails here. A host that is not installed, or has no
    emceepee entry yet, is a note, not a failure. A remote server's sign-in is read from what is
    kept for it (never a token); doctor never signs in: a server that asks is reported with the
    command that signs in to it. Exits 1 if any check failed.
    """
    import anyio

    from emceepee_cli import paths
    from emceepee_cli.calls import oneshot
    from emceepee_cli.hosts import doctor as checks_mod

    host_checks, host_env = checks_mod.host_checks()
    config_checks, loaded = checks_mod.config_checks(paths.config_path(config), host_env)
    checks = config_checks + checks_mod.journal_checks(paths.db_path(db)) + checks_mod.key_checks()
    if loaded is not None:
        checks += checks_mod.signin_checks(loaded, host_env)
    if loaded is not None and loaded.servers and not no_backends:
        env = checks_mod.host_environment(host_env)
        render.note(f"(starting {len(loaded.servers)} backend(s) as a host would: PATH={env['PATH']})")
        logs = oneshot.command_logs("emceepee doctor", loaded.defaults)
        checks += anyio.run(checks_mod.backend_checks, loaded, env, wait, config is not None, logs)
    checks += host_checks + checks_mod.serve_checks(paths.db_path(db))
    checks += checks_mod.fleet_checks(paths.config_path(config), paths.db_path(db))
    failed = checks_mod.failed(checks)
    if json:
        render.as_json({"checks": [c.json() for c in checks], "ok": not failed})
    else:
        show(checks)
    if failed:
        raise typer.Exit(1)


def show(checks: list[Check]) -> None:
    for check in checks:
        lines = check.detail.splitlines() or [""]
        render.line(
            f"{MARKS[check.state]}  {check.area:<8} {check.name}: {lines[0]}", style=STYLES[check.state]
        )
        for more in lines[1:]:
            render.line(f"                {more}")
        if check.fix and check.state != "ok":
            render.line(f"                fix: {check.fix}")
    failures = sum(c.state == "fail" for c in checks)
    render.line()
    render.line(f"{failures} check(s) failed." if failures else "Everything checked is fine.", style="bold")
