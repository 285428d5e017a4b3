"""`serve` follows its config file: a change (seen by polling the file) or a SIGHUP reloads it.

A change is applied once the file has stopped changing (the same size, mtime and inode for
SETTLE_S: an editor writing it in steps is done) and parses. A file that cannot be read or is not
TOML changes nothing: the running config stays, and the error is logged. A file that would stop
every server it had (one that names no server, or no file at all) is what an editor's save looks
like half way, truncated or deleted before the new file is written, so it is *held*: said at once
(on stderr and as a `config_reload_held` event) and applied only once it has stayed so for
EMPTYING_S. A file written back meanwhile is applied as usual, and a server whose table it did
not change never notices. SIGHUP is a person asking now: the file is applied as soon as it is
still and parses, a file that names no server included, and a hold ends.

Only the servers whose tables changed start, stop or restart (`Registry.reconfigure` in
session/registry.py); the host keeps its session. Each reload is logged on stderr; one that
changed something (or was asked for with SIGHUP, or ends a hold) becomes a `config_reloaded`
event, and one that failed a `config_reload_failed` event, so the host hears of it in its next
reply.

Idle, following costs one stat() a second; the file is looked at more often only while it changes.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from emceepee_cli.config import Config, load_config
from emceepee_cli.config.reload import Plan, Signature, emptying, signature
from emceepee_cli.errors import ConfigError
from emceepee_cli.session.wiring import Services

log = logging.getLogger(__name__)

WATCH_EVERY_S = 1.0  # how often the file is looked at
SETTLE_S = 0.5  # a file is read once it has not changed for this long: an editor writing it is done
EMPTYING_S = 5.0  # a file that would stop every server it had applies once unchanged this long
HANGUP = "SIGHUP"
CHANGED = "the file changed"


@dataclass(frozen=True)
class _Held:
    """A file that would stop every server it had: read, said, and not applied yet."""

    config: Config
    until: float  # when it applies (anyio's clock), if the file has not changed by then
    reason: str  # what the file is: "the file names no server" or "the file is gone"


class _Follower:
    """The file as last read, and the file held, if one is; `look` decides what a look at it does."""

    def __init__(self, services: Services, path: Path) -> None:
        self.services, self.path = services, path
        self.seen: Signature = signature(path)
        self.held: _Held | None = None
        self.announced = False  # a hold was said and nothing applied since: the next reload is said

    def __repr__(self) -> str:
        return f"<Follower {self.path} held={self.held is not None}>"

    def wait_s(self) -> float:
        """How long until the next look: a second, or less when a held file is due."""
        if self.held is None:
            return WATCH_EVERY_S
        return max(0.0, min(WATCH_EVERY_S, self.held.until - anyio.current_time()))

    async def look(self, asked: str | None) -> None:
        """Look at the file (`asked`: a SIGHUP came); read it once still, then apply or hold it."""
        if asked is None and signature(self.path) == self.seen:
            if self.held is not None and anyio.current_time() >= self.held.until:
                held, self.held = self.held, None
                await self.apply(held.config, f"{held.reason}, and stayed so for {EMPTYING_S:g} s")
            return
        self.seen = await _settled(self.path)
        was_held, self.held = self.held, None
        config = await _read(self.services, self.path, asked or CHANGED)
        if config is None:
            return
        plan = self.services.registry.plan(config)
        if asked is None and emptying(plan, config):
            self.hold(config, plan)
            return
        if was_held is not None:
            log.info(
                "config reload: the file changed before a hold ended (%s); nothing stopped", was_held.reason
            )
        await self.apply(config, asked or CHANGED)

    def hold(self, config: Config, plan: Plan) -> None:
        """Keep every server running for now; apply `config` only if the file stays as it is."""
        reason = "the file is gone" if self.seen is None else "the file names no server"
        # _settled saw the file unchanged for SETTLE_S already
        self.held = _Held(config, anyio.current_time() + EMPTYING_S - SETTLE_S, reason)
        if self.announced:  # said already, and the file changed since: the wait starts again
            return
        self.announced = True
        log.warning(
            "config reload: %s (%s); its servers (%s) keep running, and stop only if it stays so for "
            "%g s. Write them back to keep them, or send SIGHUP to apply it now.",
            reason,
            self.path,
            ", ".join(plan.stop),
            EMPTYING_S,
        )
        data = {
            "reason": reason,
            "would_stop": list(plan.stop),
            "applies_after_s": EMPTYING_S,
            "hint": "Nothing has stopped yet. Write the servers back to keep them running; "
            "send serve SIGHUP to apply the file now.",
        }
        self.services.events.emit("config_reload_held", None, data)

    async def apply(self, config: Config, why: str) -> None:
        say, self.announced = self.announced or why == HANGUP, False
        await _apply(self.services, config, why, say)


async def _read(services: Services, path: Path, why: str) -> Config | None:
    """The file, read and checked; None (said on stderr and as an event) if it cannot be used."""
    try:
        launch = services.registry.launch  # in the fleet, `${VAR}` and relative roots are the host's
        environ, cwd = (None, None) if launch is None else (launch.environ, launch.cwd)
        config = await anyio.to_thread.run_sync(load_config, path, environ, cwd)
    except ConfigError as exc:
        log.error("config reload (%s): %s; the running config is kept", why, exc)
        data = {"reason": why, "error": exc.message, "kept": "the running config"}
        services.events.emit("config_reload_failed", None, data)
        return None
    for problem in config.problems:
        log.warning("config: %s", problem)
    return config


async def _apply(services: Services, config: Config, why: str, say: bool) -> dict[str, Any]:
    """Apply what changed; what was done (as the event says it). `say`: an event even if nothing did."""
    plan = await services.registry.reconfigure(config)
    data = {"reason": why, **plan.summary()}
    for name, why_kept in plan.kept.items():
        log.warning("config reload: server %s keeps running as it was: %s", name, why_kept)
    if plan.defaults_changed:
        log.warning("config reload: [defaults] changed; they apply when serve restarts")
    if plan.empty:
        log.info("config reload (%s): no server changed", why)
    else:
        switched = "".join(
            f", {key} {', '.join(data[key])}" for key in ("enabled", "disabled") if key in data
        )
        log.info(
            "config reload (%s): started %s, stopped %s, restarted %s%s",
            why,
            *(", ".join(data[key]) or "none" for key in ("started", "stopped", "restarted")),
            switched,
        )
    if not plan.empty or plan.kept or plan.defaults_changed or say:  # else only a touch
        services.events.emit("config_reloaded", None, data)
    return data


def follow(services: Services, path: Path, hangup: bool = True) -> anyio.CancelScope:
    """Follow the file in the background (`watch`) until the scope returned is cancelled. `hangup`:
    SIGHUP reloads it too (not in the fleet, whose sessions share one process's signals)."""
    scope = anyio.CancelScope()

    async def run() -> None:
        with scope:
            await watch(services, path, hangup)

    services.runtime.spawn(run, name="config watch")
    return scope


async def watch(services: Services, path: Path, hangup: bool = True) -> None:
    """Reload on a change of the file at `path`, and (with `hangup`) on SIGHUP; runs until cancelled."""
    send, receive = anyio.create_memory_object_stream[str](max_buffer_size=1)
    follower = _Follower(services, path)
    async with anyio.create_task_group() as tg:
        if hangup and sys.platform != "win32":
            await tg.start(_on_hangup, send)
        while True:
            asked = None
            with anyio.move_on_after(follower.wait_s()):
                asked = await receive.receive()
            try:
                await follower.look(asked)
            except Exception:  # a bug in one reload must not end the following
                log.exception("config reload failed; serve keeps its running config")


async def _settled(path: Path) -> Signature:
    """The file's signature once two looks, SETTLE_S apart, agree."""
    now, said = signature(path), False
    while True:
        await anyio.sleep(SETTLE_S)
        again = signature(path)
        if again == now:
            return now
        if not said:
            said = True
            log.info("config file %s is changing; it is read once it settles", path)
        now = again


async def _on_hangup(
    send: MemoryObjectSendStream[str], *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        task_status.started()
        async for _ in signals:
            log.info("received SIGHUP; reloading the config")
            with contextlib.suppress(anyio.WouldBlock):  # a reload is already asked for
                send.send_nowait(HANGUP)
