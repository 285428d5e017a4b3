"""A remote backend while its server waits for the person to sign in (signin/flow.py does the
sign-in; this is what it means for the backend).

While the person is being asked: the backend's start no longer counts against its handshake's
time limit nor holds a start slot (a person may take minutes), and every call to it fails at once
with the URL to open and the command that signs in from a terminal, instead of waiting behind
the sign-in. A sign-in that ends without tokens (declined, nobody came within the window, the
authorization server refused, the flow failed) leaves the backend failed, not restarting: every
restart would ask the person again. It starts again when its token file changes (`emceepee auth
login`, from the session's watcher) or its config table does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from emceepee_cli.backends.authorization import Unauthorized
from emceepee_cli.backends.start_limit import StartSlots
from emceepee_cli.errors import BackendUnavailable
from emceepee_cli.signin.flow import Patience, Person
from emceepee_cli.signin.store import file_for, holds_tokens


class Listened(Protocol):
    """What a sign-in uses of its backend's listener (backends/listener.py's `Listener`)."""

    @property
    def patience(self) -> Patience: ...


class Backend(Protocol):
    """What a sign-in reads and does of its backend (backends/backend.py's `Backend`)."""

    @property
    def name(self) -> str: ...
    @property
    def listener(self) -> Listened: ...
    @property
    def starts(self) -> StartSlots | None: ...
    def changed(self) -> None: ...
    def refused(self, refusal: Unauthorized) -> None: ...


@dataclass
class Prompt:
    """The sign-in the person is asked for now."""

    url: str


class BackendSignIn:
    """The `Person` a backend's sign-in talks to: the owner's (serve's questions, a terminal),
    with the backend's own state kept around it."""

    def __init__(self, backend: Backend, person: Person) -> None:
        self.backend = backend
        self.person = person
        self.prompt: Prompt | None = None
        self._failed_on: tuple[int, int] | None = None  # the token file's signature when it failed

    def __repr__(self) -> str:
        return f"<BackendSignIn {self.backend.name} asking={self.prompt is not None}>"

    async def show(self, server: str, url: str) -> None:
        self.prompt = Prompt(url)
        self.backend.listener.patience.pause()
        if self.backend.starts is not None:
            self.backend.starts.release(self.backend)
        self.backend.changed()  # callers waiting for its start are told now, not at their timeout
        try:
            await self.person.show(server, url)
        except BaseException:  # nobody to show it to (doctor's `Nobody`): no sign-in is under way
            self._ended()
            raise

    def _ended(self) -> None:
        self.prompt = None
        self.backend.listener.patience.resume()
        self.backend.changed()

    async def declined(self, server: str) -> str:
        return await self.person.declined(server)

    async def done(self, server: str, signed_in: bool) -> None:
        self.prompt = None
        self.backend.listener.patience.resume()
        await self.person.done(server, signed_in)
        self.backend.changed()

    def failed(self, message: str) -> None:
        """The sign-in ended without tokens: the backend fails for good, saying why and what to run."""
        self._failed_on = _signature(file_for(self.backend.name))
        self.backend.refused(
            Unauthorized(
                message,
                hint=f"Run `emceepee auth login {self.backend.name}` to sign in from a terminal; a running "
                "serve starts the backend again once it is signed in.",
                status=401,
            )
        )

    def signed_in_elsewhere(self) -> bool:
        """Its sign-in failed, and its token file changed since and holds tokens (someone signed in;
        not a sign-in that only began, which drops the old tokens first)."""
        if self._failed_on is None:
            return False
        now = _signature(file_for(self.backend.name))
        return now not in (self._failed_on, (0, 0)) and holds_tokens(self.backend.name)

    def unavailable(self) -> BackendUnavailable | None:
        """What a call to the backend is told while the person is asked to sign in."""
        if self.prompt is None:
            return None
        name = self.backend.name
        return BackendUnavailable(
            f"Backend '{name}' is waiting for you to sign in to its server. Open this link to sign in "
            f"(emceepee also opened it in your browser): {self.prompt.url}",
            hint=f"Or sign in from a terminal: `emceepee auth login {name}`. Call again once signed in "
            "(await_activity hears server_connected).",
        )


def _signature(path: Path) -> tuple[int, int]:
    try:
        found = path.stat()
    except OSError:
        return (0, 0)
    return (found.st_mtime_ns, found.st_size)
