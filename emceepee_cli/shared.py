"""What every part of one `serve` stands on, in one value: `Shared`.

The journal (store/aio.py), the events the host hears (events.py), the task group and its
guards (runtime.py), the config's `[defaults]` and this process's instance id were threaded one
by one through most constructors. They are one thing: the parts a future fleet of backends,
shared by several hosts of one user, would share. What belongs to one host's session (its link,
its roots, its own tool lists, the model's pending server changes) is not in here: it stays with
the session's parts (session/). Built once, in session/wiring.py; frozen, so no part can swap
what the others stand on.
"""

from __future__ import annotations

from dataclasses import dataclass

from emceepee_cli.config import Defaults
from emceepee_cli.events import Events
from emceepee_cli.runtime import Runtime
from emceepee_cli.store.aio import AsyncJournal


@dataclass(frozen=True)
class Shared:
    journal: AsyncJournal
    events: Events
    runtime: Runtime
    defaults: Defaults
    instance_id: str

    def __repr__(self) -> str:
        return f"<Shared {self.instance_id}>"
