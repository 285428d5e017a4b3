"""`serve` follows its config file: a change (seen by polling the file) or a SIGHUP reloads it.

Only the servers whose tables changed start, stop or restart (`Servers.reconfigure`); the host
keeps its session. A file that cannot be read or is not TOML changes nothing: the running config
stays, and the error is logged. Each reload is logged on stderr; one that changed something (or
was asked for with SIGHUP) becomes a `config_reloaded` event, and one that failed a
`config_reload_failed` event, so the host hears of it in its next reply.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from emceepee_cli.config import load_config
from emceepee_cli.config.reload import Signature, signature
from emceepee_cli.core.wiring import Services
from emceepee_cli.errors import ConfigError

log = logging.getLogger(__name__)

WATCH_EVERY_S = 1.0  # how often the file is looked at
SETTLE_S = 0.2  # a file still changing (an editor writing it in steps) is read once it is still


async def reload(services: Services, path: Path, why: str) -> dict[str, Any]:
    """Read the file again and apply what changed; what was done (as the event says it)."""
    try:
        config = await anyio.to_thread.run_sync(load_config, path)
    except ConfigError as exc:
        log.error("config reload (%s): %s; the running config is kept", why, exc)
        data = {"reason": why, "error": exc.message, "kept": "the running config"}
        services.events.emit("config_reload_failed", None, data)
        return data
    for problem in config.problems:
        log.warning("config: %s", problem)
    plan = await services.servers.reconfigure(config)
    data = {"reason": why, **plan.summary()}
    for name, why_kept in plan.kept.items():
        log.warning("config reload: server %s keeps running as it was: %s", name, why_kept)
    if plan.defaults_changed:
        log.warning("config reload: [defaults] changed; they apply when serve restarts")
    if plan.empty:
        log.info("config reload (%s): no server changed", why)
    else:
        log.info(
            "config reload (%s): started %s, stopped %s, restarted %s",
            why,
            *(", ".join(data[key]) or "none" for key in ("started", "stopped", "restarted")),
        )
    if not plan.empty or plan.kept or plan.defaults_changed or why == "SIGHUP":  # else only a touch
        services.events.emit("config_reloaded", None, data)
    return data


def follow(services: Services, path: Path) -> anyio.CancelScope:
    """Follow the file in the background (`watch`) until the scope returned is cancelled."""
    scope = anyio.CancelScope()

    async def run() -> None:
        with scope:
            await watch(services, path)

    services.runtime.spawn(run, name="config watch")
    return scope


async def watch(services: Services, path: Path, hangup: bool = True) -> None:
    """Reload on a change of the file at `path`, and (with `hangup`) on SIGHUP; runs until cancelled."""
    send, receive = anyio.create_memory_object_stream[str](max_buffer_size=1)
    async with anyio.create_task_group() as tg:
        if hangup and sys.platform != "win32":
            await tg.start(_on_hangup, send)
        seen = signature(path)
        while True:
            why = None
            with anyio.move_on_after(WATCH_EVERY_S):
                why = await receive.receive()
            if why is None and signature(path) == seen:
                continue
            seen = await _settled(path)
            try:
                await reload(services, path, why or "the file changed")
            except Exception:  # a bug in one reload must not end the following
                log.exception("config reload failed; serve keeps its running config")


async def _settled(path: Path) -> Signature:
    """The file's signature once two looks, SETTLE_S apart, agree."""
    now = signature(path)
    while True:
        await anyio.sleep(SETTLE_S)
        again = signature(path)
        if again == now:
            return now
        now = again


async def _on_hangup(
    send: MemoryObjectSendStream[str], *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        task_status.started()
        async for _ in signals:
            log.info("received SIGHUP; reloading the config")
            with contextlib.suppress(anyio.WouldBlock):  # a reload is already asked for
                send.send_nowait("SIGHUP")
