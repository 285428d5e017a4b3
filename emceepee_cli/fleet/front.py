"""`serve` as the front: a thin relay to the per-user fleet, or `serve` in-process as before.

Whether the fleet is used (`choice`): it is, unless `EMCEEPEE_FLEET=0` or `[fleet] enabled = false`
says no (either wins over a yes: `EMCEEPEE_FLEET=1`, `enabled = true`), or the platform has no Unix
sockets; then `serve` runs in-process, saying why once on stderr.

Used, the front connects to the fleet for its config and journal, starting one if none runs
(fleet/starter.py), says on stderr which fleet it reached, and relays lines between the host's
stdio and its session there (fleet/relay.py) — with no MCP SDK loaded: a Python with typer is its
whole cost. Whatever keeps it from the fleet at the start (the socket cannot be made or reached, a
folder or socket another user could use, a fleet that does not start) is said once on stderr
(`serving in-process (no fleet): …`), and `serve` runs in-process, exactly as without the fleet.
Once serving, a fleet that dies is replaced: the front reaches one again with the same hello (naming
the session it had) and replays the host's handshake there (fleet/replay.py); the host sees only
its requests in flight fail.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import replace
from pathlib import Path

from emceepee_cli import __version__, paths, rendezvous
from emceepee_cli.config.load import fleet_settings
from emceepee_cli.fleet import starter
from emceepee_cli.fleet.hello import Hello
from emceepee_cli.fleet.relay import Relay


def choice(config_path: Path) -> tuple[bool, str | None]:
    """Whether to serve through the fleet (it is on unless someone said no); when not, why."""
    on, said = rendezvous.switch(config_path, fleet_settings(config_path).enabled)
    if not on:
        return False, said
    if sys.platform == "win32" or not hasattr(socket, "AF_UNIX"):
        return False, "this platform has no Unix sockets"
    return True, None


def run(config_path: Path, db: Path | None = None, verbose: bool = False) -> int:
    """Serve the host on stdio, through the fleet when it is wanted and reached; the exit code."""
    wanted, why = choice(config_path)
    if wanted:
        try:
            where, hello = greeting(config_path, db, verbose)
            connection = starter.connect_or_start(where, hello)
        except rendezvous.Refused as exc:
            why = str(exc)
        else:
            welcome = connection.welcome
            sys.stderr.write(
                f"emceepee: serving through the fleet, pid {welcome.pid} (session {welcome.session}); "
                f"its log: {starter.fleet_log()}\n"
            )
            sys.stderr.flush()

            def again(previous: str) -> starter.Connection:
                return starter.connect_or_start(where, replace(hello, previous=previous))

            return Relay(connection, again).run()
    from emceepee_cli.server.app import run_stdio  # the SDK: only when serving in-process

    run_stdio(config_path, verbose=verbose, db_path=db, notice=why)
    return 0


def greeting(config_path: Path, db: Path | None, verbose: bool) -> tuple[rendezvous.Place, Hello]:
    """Where the fleet for this config and journal lives, and this host's hello; else `Refused`."""
    config, journal = config_path.absolute(), paths.db_path(db).absolute()
    try:
        cwd = os.getcwd()
    except OSError as exc:
        raise rendezvous.Refused(f"this process's working directory is gone ({exc.strerror})") from None
    hello = Hello(
        version=__version__,
        front_pid=os.getpid(),
        cwd=cwd,
        env=dict(os.environ),
        config=str(config),
        db=str(journal),
        verbose=verbose,
    )
    return rendezvous.place(config, journal), hello
