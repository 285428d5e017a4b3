"""What a running `serve` does when its config file changes: which servers start, stop or restart.

`plan` compares the servers that run with the file as it is now. Only what changed is touched: a
server whose table is the same keeps running (its calls, its process, its tools). A server added
at run time and not saved (`add_server(persist=false)`) is not in the file and is kept. A server
whose new table is broken keeps running as it was, and the plan says why, so a typo never takes
a working backend down; the same goes for a file that is not TOML at all (the caller keeps the
whole running config). `[defaults]` are read when `serve` starts: a change is reported, not applied.

`emptying` says when a file would stop every server it had: what an editor's save looks like
half way (the file truncated, or deleted before it is written anew) as often as a choice, so the
file watch waits longer before it applies one (server/reload.py).

`Signature` tells a file that changed from one that did not, cheaply, for the file watch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emceepee_cli.config.model import Config, ConfigProblem, ServerSpec

# (device, inode, size, modification time in ns); None when there is no file
Signature = tuple[int, int, int, int] | None


def signature(path: Path) -> Signature:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class Plan:
    """The servers to start, stop and restart (stop, then start with the new table)."""

    start: tuple[ServerSpec, ...] = ()
    stop: tuple[str, ...] = ()
    restart: tuple[ServerSpec, ...] = ()
    kept: dict[str, str] = field(default_factory=dict[str, str])  # a broken table: name -> why
    defaults_changed: bool = False
    was_off: frozenset[str] = frozenset()  # of `restart`, those that were disabled before

    @property
    def empty(self) -> bool:
        return not (self.start or self.stop or self.restart)

    def summary(self) -> dict[str, Any]:
        """What changed, as the `config_reloaded` event and the log line show it: a server switched
        on is `enabled`, one that is off now (switched off, or added or changed while off) is
        `disabled`; neither is said to have started or restarted, as neither had a process."""
        out: dict[str, Any] = {
            "started": [s.name for s in self.start if s.enabled],
            "stopped": list(self.stop),
            "restarted": [s.name for s in self.restart if s.enabled and s.name not in self.was_off],
        }
        enabled = [s.name for s in self.restart if s.enabled and s.name in self.was_off]
        disabled = [s.name for s in (*self.start, *self.restart) if not s.enabled]
        out |= {"enabled": enabled} if enabled else {}
        out |= {"disabled": disabled} if disabled else {}
        if self.kept:
            out["kept_running"] = dict(self.kept)
        if self.defaults_changed:
            out["defaults"] = "changed; [defaults] apply when serve restarts"
        return out


def plan(running: Mapping[str, ServerSpec], loaded: Config, new: Config) -> Plan:
    """What to do to go from the servers `running` (the file as last `loaded`) to the file `new`.

    `running` holds every backend serve has, those added at run time included."""
    broken = _broken(new.problems)
    start, restart, kept = [], [], {}
    for name, spec in new.servers.items():
        if name not in running:
            start.append(spec)
        elif running[name] != spec:
            restart.append(spec)
    # A server the file no longer has is stopped only if it came from the file; a broken one stays.
    stop = []
    for name in running:
        if name in new.servers or name not in loaded.servers:
            continue
        if name in broken:
            kept[name] = broken[name]
        else:
            stop.append(name)
    return Plan(
        start=tuple(start),
        stop=tuple(stop),
        restart=tuple(restart),
        kept=kept,
        defaults_changed=new.defaults != loaded.defaults,
        was_off=frozenset(spec.name for spec in restart if not running[spec.name].enabled),
    )


def emptying(plan: Plan, new: Config) -> bool:
    """The file `new` names no server, and going over to it would stop some (`plan`)."""
    return not new.servers and bool(plan.stop)


def _broken(problems: tuple[ConfigProblem, ...]) -> dict[str, str]:
    """Each server whose table could not be read, and every problem of it in one line."""
    out: dict[str, list[str]] = {}
    for problem in problems:
        if problem.server is not None:
            out.setdefault(problem.server, []).append(str(problem))
    return {name: "; ".join(found) for name, found in out.items()}
