"""How a backend's connection ended, said once: as the backend's `last_error`, and as what a call it
cut off is told.

A call in flight when the backend dies fails at once with the exit status and stderr tail, and so
does a call that waits for a backend whose start just failed (it is not made to wait out the
restart backoff). "At once" is once the transport has stopped the process and read its stderr
(`ProcessInfo.settled`), whichever of its exit and its last stderr lines came first; and a call on
its way to the backend when it died (dispatched while it was ready, its request not yet sent) fails
with that death too, not with the restart that follows. A call cut off because emceepee stopped the
backend on purpose (a `StopReason`: a config change restarts it, it was removed) or closed its
connection (a line it could not read) is told that instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import anyio

from emceepee_cli.backends import transport
from emceepee_cli.backends.failures import closed, describe
from emceepee_cli.errors import BackendError, Hints

# A call failed by its backend's death waits for the transport to stop the process and read its
# stderr (`ProcessInfo.settled`), so that its error has the exit status and the last stderr lines,
# whatever order they arrive in; that stop and drain are bounded, and so is this wait.
DEATH_REPORT_WAIT_S = transport.STOP_BOUND_S + transport.STDERR_DRAIN_S + 1.0
DEATH_TAIL_LINES = 10  # of stderr, in an error that reports a backend's exit
DEATH_TAIL_CHARS = 2000
RETRY_HINT = "It is being restarted; retry the call once list_servers shows it ready."


def retry_hints(server: str) -> Hints:
    """After a backend's death: under serve it is being restarted; a command starts it afresh."""
    return Hints(
        hint=RETRY_HINT,
        cli_hint=f"Run the command again to start it afresh; its stderr is in: emceepee logs {server}",
    )


@dataclass(frozen=True)
class StopReason:
    """Why emceepee stopped a backend on purpose, as the calls it cuts off are told."""

    said: str  # completes "Backend 'x' was …", e.g. "restarted because its config table changed"
    hint: str


def death_report(process: transport.ProcessInfo) -> str:
    """How the process ended, and the last lines of its stderr."""
    tail = "\n".join(list(process.stderr_tail)[-DEATH_TAIL_LINES:])[-DEATH_TAIL_CHARS:]
    return process.describe_exit() + (f"; stderr tail:\n{tail}" if tail else "")


def failure(exc: Exception, process: transport.ProcessInfo | None, *, was_ready: bool, lost: bool) -> str:
    """The last error of a connection that ended with `exc`; `lost`: the connection was seen to go."""
    if process is not None and process.returncode is not None and process.stopped_with is None:
        return f"exited{'' if was_ready else ' during start-up'} ({death_report(process)})"
    text = describe(exc)
    if process is not None and (lost or closed(exc)):
        text += f"; {death_report(process)}"
    return text


def lost_ready(process: transport.ProcessInfo) -> str:
    """Why a ready connection ended, once its process is stopped."""
    if process.dropped is not None:
        return f"{process.dropped} ({death_report(process)})"
    if process.returncode is not None and process.stopped_with is None:
        return f"exited ({death_report(process)})"
    return f"closed the connection while running; emceepee stopped it ({death_report(process)})"


async def cut_off(
    server: str,
    what: str,
    process: transport.ProcessInfo | None,
    stopped_for: StopReason | None,
    *,
    sent: bool,
) -> BackendError:
    """Why `what` failed with the connection to `process`: emceepee stopped the backend, or closed
    the connection, or the process died (said once its exit status and stderr tail are known).
    `sent`: the request reached the connection before it ended (else the call was on its way)."""
    if stopped_for is not None:
        return BackendError(
            f"Backend '{server}' was {stopped_for.said} while {what} was running; the call was cut off.",
            hint=stopped_for.hint,
        )
    during = f"during {what}" if sent else f"before {what} was sent"
    if process is not None and process.dropped is not None:
        return BackendError(
            f"Backend '{server}' lost its connection {during}: {process.dropped}.", **retry_hints(server)
        )
    if process is None:
        return BackendError(f"Lost the connection to backend '{server}' {during}")
    with anyio.move_on_after(DEATH_REPORT_WAIT_S):
        await process.settled.wait()
    exited = process.returncode is not None and process.stopped_with is None
    ended = "exited" if exited else "closed the connection"
    return BackendError(
        f"Backend '{server}' {ended} {during} ({death_report(process)})", **retry_hints(server)
    )
