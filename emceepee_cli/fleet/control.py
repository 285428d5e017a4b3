"""Control connections: the command line asking the fleet something, on the socket fronts use.

The first line on a connection (at most `HELLO_MAX_BYTES`, from a peer of this user, as a front's
hello) is read by `opening`: a front's hello (fleet/hello.py), or a control request that
emceepee_cli/rendezvous.py's `control_line` writes,

    {"emceepee_control": 1, "op": "status", "version": "0.1.0"}

which the fleet answers with one JSON line (`answer_line`), then closes:

- `status` (`emceepee fleet status`, `doctor`): what the fleet is (`Fleet.describe` in
  fleet/daemon.py: pid, version, start and uptime, socket, memory, idle exit), the hosts connected
  (`HostSeen`: session, front pid, cwd, since when, the host's name and version once it has said
  them) and the backends it runs;
- `stop` (`emceepee fleet stop`): `{"stopping": PID}`; then the fleet stops as on SIGTERM: its socket
  removed first, every host's session ended (bounded), and it exits. A host still connected sees
  its server end, and its next `serve` starts a new fleet;
- `poke` (`emceepee answer`, once it has written an answer): `{"poked": N}`; every journal watcher
  of the fleet looks at the journal now (session/watcher.py), so the backend waiting for the
  answer gets it at once, not at the watcher's next tick.

A request of another version, or of another shape, is refused: `{"refused": "why"}`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import psutil

from emceepee_cli import __version__
from emceepee_cli.fleet.hello import Hello, refusal_line
from emceepee_cli.rendezvous import CONTROL_OPS, CONTROL_PROTOCOL
from emceepee_cli.server.fastlane import FastLane
from emceepee_cli.session import watcher

MB = 1024 * 1024


@dataclass(frozen=True)
class ControlRequest:
    """What the command line asks: an op of `CONTROL_OPS`, by an emceepee of `version`."""

    op: str
    version: str

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> ControlRequest:
        """The request in a parsed first line; `ValueError` saying what is wrong when it is not one."""
        if doc.get("emceepee_control") != CONTROL_PROTOCOL:
            raise ValueError(f"not a control request of protocol {CONTROL_PROTOCOL}")
        op, version = doc.get("op"), doc.get("version")
        if not isinstance(version, str):
            raise ValueError("its 'version' is not a string")  # noqa: TRY004  # a bad request, said as one
        if op not in CONTROL_OPS:
            raise ValueError(f"its op {str(op)[:40]!r} is none of {', '.join(CONTROL_OPS)}")
        return cls(str(op), version)


def opening(raw: bytes) -> Hello | ControlRequest:
    """The first line of a connection: a front's hello, or a control request; else `ValueError`."""
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deep") from None
    if isinstance(doc, dict) and "emceepee_control" in doc:
        return ControlRequest.from_doc(cast(dict[str, Any], doc))
    return Hello.from_doc(doc)


class Described(Protocol):
    def describe(self) -> dict[str, Any]: ...


def answer_line(fleet: Described, request: ControlRequest) -> bytes:
    """The fleet's one-line answer to `request` (a `stop` is the caller's to carry out, once sent)."""
    if request.version != __version__:
        return refusal_line(f"this fleet runs emceepee {__version__}, the command {request.version}")
    if request.op == "status":
        doc = fleet.describe()
    elif request.op == "stop":
        doc = {"stopping": os.getpid()}
    else:
        doc = {"poked": watcher.poke_all()}
    return json.dumps(doc, default=str).encode() + b"\n"


@dataclass
class HostSeen:
    """A host's session in the fleet, as `status` shows it."""

    session: str
    front_pid: int
    cwd: str
    since: str  # when it connected (clock.now_iso)
    lane: FastLane = field(repr=False)  # its session's parts, from which its name is read

    def described(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "front_pid": self.front_pid,
            "cwd": self.cwd,
            "since": self.since,
            "client": self.client(),
        }

    def client(self) -> dict[str, str] | None:
        """The host's name and version, once its `initialize` has said them."""
        services = self.lane.services
        session = services.host.session if services is not None else None
        params = session.client_params if session is not None else None
        if params is None:
            return None
        return {"name": params.client_info.name, "version": params.client_info.version}


def rss_mb(pid: int | None = None) -> float | None:
    """A process's resident memory (default this one's), in MiB; None when it is gone."""
    try:
        return round(psutil.Process(pid).memory_info().rss / MB, 1)
    except psutil.Error:
        return None
