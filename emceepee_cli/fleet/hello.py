"""The first line on a connection to the fleet, and the fleet's answer; after them the connection
is one host's MCP session, byte for byte.

The front sends its hello, one JSON line:

    {"emceepee_front": 1, "version": "0.1.0", "front": {"pid": 4242}, "previous": null,
     "cwd": "/home/me/project", "env": {...}, "config": "/…/config.toml", "db": "/…/journal.db",
     "verbose": false}

`env` and `cwd` are the host's, which its backends start from (backends/launch.py); `previous`
names the session a front had before its fleet died (fleet/relay.py), null at first; a fleet may
take over that session's calls and events by it. The fleet answers
`{"session": "01J…", "pid": 4321}`, or `{"refused": "why"}` and closes. A hello is at most
`HELLO_MAX_BYTES`; whatever it holds is never logged. The command line's connections begin with a
control request instead (fleet/control.py).

The standard library only: the front imports this.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

FRONT_PROTOCOL = 1  # the hello's shape; a fleet refuses a hello of another
HELLO_MAX_BYTES = 1024 * 1024  # an environment is rarely past 100 KB
ANSWER_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class Hello:
    """Who connects: the front's version and pid, and the host's environment, cwd and files."""

    version: str
    front_pid: int
    cwd: str
    env: Mapping[str, str] = field(repr=False)
    config: str
    db: str
    verbose: bool = False
    previous: str | None = None

    def line(self) -> bytes:
        doc = {
            "emceepee_front": FRONT_PROTOCOL,
            "version": self.version,
            "front": {"pid": self.front_pid},
            "previous": self.previous,
            "cwd": self.cwd,
            "env": dict(self.env),
            "config": self.config,
            "db": self.db,
            "verbose": self.verbose,
        }
        return json.dumps(doc, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def parse(cls, raw: bytes) -> Hello:
        """The hello in `raw`; `ValueError` saying what is wrong when it is not one."""
        try:
            doc = json.loads(raw)
        except RecursionError:
            raise ValueError("nested too deep") from None
        return cls.from_doc(doc)

    @classmethod
    def from_doc(cls, doc: object) -> Hello:
        """The hello in a parsed first line; `ValueError` saying what is wrong when it is not one."""
        if not isinstance(doc, dict) or doc.get("emceepee_front") != FRONT_PROTOCOL:
            raise ValueError(f"not a hello of front protocol {FRONT_PROTOCOL}")
        fields = cast(dict[str, Any], doc)
        front, env = fields.get("front"), fields.get("env")
        if not isinstance(front, dict) or type(cast(dict[str, Any], front).get("pid")) is not int:
            raise ValueError("its 'front' has no pid")
        if not isinstance(env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise ValueError("its 'env' is not a table of strings")
        for key in ("version", "cwd", "config", "db"):
            if not isinstance(fields.get(key), str):
                raise ValueError(f"its {key!r} is not a string")  # noqa: TRY004  # a bad hello, said as one
        previous = fields.get("previous")
        return cls(
            version=fields["version"],
            front_pid=cast(dict[str, int], front)["pid"],
            cwd=fields["cwd"],
            env=cast(dict[str, str], env),
            config=fields["config"],
            db=fields["db"],
            verbose=fields.get("verbose") is True,
            previous=previous if isinstance(previous, str) else None,
        )


@dataclass(frozen=True)
class Welcome:
    """The fleet's yes: the host's session there, and the fleet's pid."""

    session: str
    pid: int


def welcome_line(welcome: Welcome) -> bytes:
    return json.dumps({"session": welcome.session, "pid": welcome.pid}).encode() + b"\n"


def refusal_line(why: str) -> bytes:
    return json.dumps({"refused": why}).encode() + b"\n"


def parse_answer(raw: bytes) -> Welcome | str:
    """The fleet's answer: its welcome, or why it refused (a str)."""
    doc = json.loads(raw)
    if isinstance(doc, dict) and isinstance(doc.get("refused"), str):
        return cast(str, doc["refused"])
    if isinstance(doc, dict) and isinstance(doc.get("session"), str) and type(doc.get("pid")) is int:
        return Welcome(doc["session"], doc["pid"])
    raise ValueError("the fleet's answer is neither a welcome nor a refusal")


def read_answer(sock: socket.socket, timeout_s: float) -> bytes | None:
    """The fleet's answer line from a blocking socket, its newline cut, and not a byte past it (what
    follows is the MCP session's: read a byte at a time, as the line is short); None at EOF before
    a whole line. `TimeoutError` past `timeout_s`, `ValueError` past `ANSWER_MAX_BYTES`."""
    deadline = time.monotonic() + timeout_s
    line = bytearray()
    while len(line) <= ANSWER_MAX_BYTES:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        byte = sock.recv(1)
        if not byte:
            return None
        if byte == b"\n":
            sock.settimeout(None)
            return bytes(line)
        line += byte
    raise ValueError(f"the fleet's answer is longer than {ANSWER_MAX_BYTES} bytes")
