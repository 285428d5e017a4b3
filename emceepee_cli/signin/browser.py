"""Opening the person's browser on an authorization URL (signin/flow.py's sign-in).

Where emceepee runs in the person's own environment (`serve` started by the host, a terminal's
`emceepee auth login`), Python's `webbrowser` opens it, reading that environment (`$BROWSER`,
`DISPLAY`…). In the fleet, one process serves every host and its own environment holds none of
a host's (fleet/starter.py's `fleet_env`: no display, no `$BROWSER`), so the browser is started
from the environment of the host whose backend signs in (backends/launch.py), as `webbrowser`
would pick it there: each program `$BROWSER` names (`:`-separated, each one program, given the
URL), then the desktop's opener (`open` on macOS; `xdg-open`, `gio open`, `x-www-browser` where
the host has a `DISPLAY` or `WAYLAND_DISPLAY`), each found on the host's PATH, until one exits 0.

Always in the background: a browser command may not return until the page it opened is answered,
which happens on the loopback listener. No browser is not an error: the URL is also shown (a
terminal prints it, serve asks it as a URL question).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import webbrowser
from collections.abc import Mapping

Openers = tuple[tuple[str, ...], ...]  # each a program and its first arguments; the URL follows

DESKTOP_OPENERS: Openers = (("xdg-open",), ("gio", "open"), ("x-www-browser",))
MAC_OPENERS: Openers = (("open",),)


def open_browser(url: str, environ: Mapping[str, str] | None = None) -> None:
    """Open `url` in the person's browser, in the background; `environ`: the host's environment
    to start it from (None: emceepee's own, through `webbrowser`)."""
    if environ is None:
        threading.Thread(target=_open, args=(url,), name="emceepee-browser", daemon=True).start()
        return
    commands = browser_commands(environ)
    if commands:
        args = (url, commands, dict(environ))
        threading.Thread(target=_open_from, args=args, name="emceepee-browser", daemon=True).start()


def browser_commands(environ: Mapping[str, str]) -> list[list[str]]:
    """The commands tried in turn to open a URL (each is given it last) for a host whose
    environment is `environ`."""
    commands = [[choice] for choice in environ.get("BROWSER", "").split(os.pathsep) if choice]
    if sys.platform == "darwin":
        openers = MAC_OPENERS
    elif environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"):
        openers = DESKTOP_OPENERS
    else:
        openers = ()
    path = environ.get("PATH", os.defpath)
    for program, *args in openers:
        if found := shutil.which(program, path=path):
            commands.append([found, *args])
    return commands


def _open(url: str) -> None:
    try:
        webbrowser.open(url)
    except Exception:  # noqa: BLE001 - no browser is not an error: the URL is shown anyway
        return


def _open_from(url: str, commands: list[list[str]], environ: dict[str, str]) -> None:
    """Run each command with the host's environment (its PATH finds a bare `$BROWSER` name) until
    one opens the URL; stderr goes where emceepee's does (the fleet's log)."""
    for command in commands:
        try:
            opened = subprocess.run(
                [*command, url], env=environ, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=False
            )
        except OSError:
            continue
        if opened.returncode == 0:
            return
