"""Where one host's stdio backends start when `serve` is not the host's own process.

In-process, `serve` was started by the host: its environment and working directory are the host's,
and a backend inherits them (backends/environment.py picks what it sees of the environment). In
the fleet (emceepee_cli/fleet/daemon.py) one process serves every host, so each host's front sends
its environment and working directory in its hello, and its session's backends start from those:
`${VAR}` is filled in from the host's variables, the allowlist and `pass_env` read them, a
backend without its own `cwd` (or with a relative one) starts in the host's, a relative root and
`~` are the host's (`base`), and a remote backend's proxies and CA are the host's
(backends/connect.py's `network`). The environment is never logged nor journaled.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from emceepee_cli.config import PathBase


@dataclass(frozen=True)
class Launch:
    """One host's environment and working directory, for the backends started for it."""

    environ: Mapping[str, str] = field(repr=False)
    cwd: str

    @property
    def base(self) -> PathBase:
        """Where the config's relative roots and `~` start for this host."""
        return PathBase(self.cwd, self.environ)

    def cwd_for(self, own: str | None) -> str:
        """A backend's working directory: its own (a relative one from the host's), else the host's."""
        return self.cwd if own is None else os.path.join(self.cwd, own)

    def command_for(self, command: str, cwd: str) -> str:
        """A command given as a relative path (`./server.sh`) from the backend's working directory,
        as it would be run there; any other command as it is (looked up on PATH, or absolute)."""
        if os.sep not in command or os.path.isabs(command):
            return command
        return os.path.join(cwd, command)
