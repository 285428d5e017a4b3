"""The model's changes to the set of backends (`add_server`, `remove_server`), through a gate.

`add_server` starts whatever program the model names: it is the most powerful meta-tool there
is. `remove_server` stops a server the user chose and edits the config. `[defaults]
model_adds_servers` says what either does when the model calls it:

- `approve` (the default): it waits for an approval that only a person may accept — through the
  host's own form, or with `emceepee answer ID` at a terminal — never the model, whatever
  `approval_by` says (of it, only "host" and "cli" count here). The only way for the model to
  skip the person is the user writing `allow`.
- `allow`: done at once. `deny`: refused at once.

Lifecycle of an approved change: checked first (a name taken, a spec the config could not hold,
a secret-looking value it would save: refused before anyone is asked) → asked as emceepee's own
question (`server` "emceepee", purpose "approval", `approval.change` naming the tool, showing
exactly what would run — in the fleet as the host's session would run it: the executable on the
host's PATH, in the host's working directory (backends/launch.py) — and only the names of env and
headers) → forwarded to the host or parked → a background job waits for the answer and makes
the change once it is accepted. The model's call waits for that up to its timeout (a host that
sent a progressToken hears a heartbeat meanwhile); past it, the model is told the request id and
how a person approves, and hears the outcome later as a `server_change` event. Declined, expired
or withdrawn: nothing started, nothing written.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from emceepee_cli.backends.environment import backend_env
from emceepee_cli.backends.launch import Launch
from emceepee_cli.calls.call import Relay
from emceepee_cli.config import Defaults, ServerSpec
from emceepee_cli.config.load import RESERVED_NAME
from emceepee_cli.errors import EmceepeeError, UsageError
from emceepee_cli.hosts.importing import looks_secret, secrets_in
from emceepee_cli.questions.questions import Questions
from emceepee_cli.session.registry import Registry
from emceepee_cli.session.servers import server_row
from emceepee_cli.shared import Shared
from emceepee_cli.store.records import Kind, PendingRow

OWN = RESERVED_NAME  # the `server` of emceepee's own questions: no backend may be named so
PEOPLE = ("host", "cli")  # who may accept a change: a person, in the host or at a terminal
EMPTY_FORM = {"type": "object", "properties": {}}
KEY = "[defaults] model_adds_servers"


class ServerChangeDenied(UsageError):
    """The user's config does not let the model add or remove servers."""


@dataclass(eq=False)
class Change:
    """One change the model asked for, from its approval question to its outcome."""

    tool: str  # add_server | remove_server
    name: str
    make: Callable[[], Awaitable[dict[str, Any]]]
    finished: anyio.Event = field(default_factory=anyio.Event)
    done: dict[str, Any] | None = None  # what the change gave, once made
    error: EmceepeeError | None = None  # why it could not be made, once approved
    row: PendingRow | None = None  # its approval, settled
    detached: bool = False  # the model's call stopped waiting: the outcome goes out as an event

    def __repr__(self) -> str:
        return f"<Change {self.tool} {self.name} {'finished' if self.finished.is_set() else 'waiting'}>"


class ServerChanges:
    def __init__(self, registry: Registry, questions: Questions, shared: Shared) -> None:
        self.registry = registry  # where the change is made (session/registry.py)
        self.questions = questions
        self.events = shared.events
        self.runtime = shared.runtime
        self.defaults = shared.defaults
        self.awaiting: dict[str, str] = {}  # server name -> request id of its change awaiting approval
        self._settling: set[anyio.CancelScope] = set()  # the background waits for approvals

    def __repr__(self) -> str:
        return f"<ServerChanges {self.defaults.model_adds_servers} awaiting={list(self.awaiting)}>"

    async def add(
        self, spec: ServerSpec, persist: bool, timeout_ms: int | None = None, relay: Relay | None = None
    ) -> dict[str, Any]:
        self._refuse_if_denied("add_server", spec.name, f"emceepee servers add {spec.name} -- <command>")
        self._refuse_if_awaiting(spec.name)
        self.registry.check_new(spec)  # before anyone is asked: a change that cannot be made is not
        if persist:
            _refuse_secrets(spec)
        saved = (
            " and be saved to emceepee's config (so it starts whenever emceepee does)"
            if persist
            else " until emceepee stops (not saved)"
        )
        launch = self.registry.launch
        message = (
            f"The model asks to add server '{spec.name}', which would {runs(spec, launch=launch)}{saved}. "
            "Accept to start it, decline to refuse."
        )
        shown = {**described(spec, launch), "persist": persist}

        async def make() -> dict[str, Any]:
            backend = await self.registry.add(spec, persist)
            return {**server_row(backend), "persisted": persist}

        return await self._gated(Change("add_server", spec.name, make), message, shown, timeout_ms, relay)

    async def remove(
        self, name: str, timeout_ms: int | None = None, relay: Relay | None = None
    ) -> dict[str, Any]:
        self._refuse_if_denied("remove_server", name, f"emceepee servers remove {name}")
        self._refuse_if_awaiting(name)
        spec, launch = self.registry.backend(name).spec, self.registry.launch
        message = (
            f"The model asks to remove server '{name}' (it {runs(spec, 'runs', launch)}): it would be "
            "stopped and removed from emceepee's config. Accept to remove it, decline to keep it."
        )

        async def make() -> dict[str, Any]:
            backend, removed_from_config = await self.registry.remove(name)
            status = backend.status.value
            return {"removed": name, "status": status, "removed_from_config": removed_from_config}

        change = Change("remove_server", name, make)
        return await self._gated(change, message, described(spec, launch), timeout_ms, relay)

    def stop(self) -> None:
        """serve stops: no approval is waited for any longer; each question is withdrawn."""
        for scope in list(self._settling):
            scope.cancel()

    # ---- the gate ----------------------------------------------------------------------------

    def _refuse_if_denied(self, tool: str, name: str, by_hand: str) -> None:
        if self.defaults.model_adds_servers == "deny":
            raise ServerChangeDenied(
                f"{tool}('{name}') is turned off by emceepee's config ({KEY} = \"deny\"). "
                "Nothing was started, stopped or written.",
                hint=f"Ask the user to do it in a terminal ({by_hand}), or to set {KEY} to "
                '"approve" (a person approves each change) or "allow".',
            )

    def _refuse_if_awaiting(self, name: str) -> None:
        if name in self.awaiting:
            request_id = self.awaiting[name]
            raise UsageError(
                f"A change to server '{name}' already waits for approval (request {request_id}).",
                hint="A person approves or declines it in their MCP client, or with: "
                f"emceepee answer {request_id}",
            )

    async def _gated(
        self,
        change: Change,
        message: str,
        shown: dict[str, Any],
        timeout_ms: int | None,
        relay: Relay | None,
    ) -> dict[str, Any]:
        if self.defaults.model_adds_servers == "allow":
            return await change.make()
        approval = {
            "tool": change.tool,
            "change": change.tool,
            "arguments": shown,
            "reason": f'it changes which programs emceepee runs ({KEY} = "approve")',
            "by": list(approvers(self.defaults)),
        }
        self.awaiting[change.name] = "(being asked)"  # a second call for this name meanwhile is refused
        try:
            question = await self.questions.ask(
                OWN,
                Kind.ELICITATION,
                {"mode": "form", "message": message, "requested_schema": EMPTY_FORM},
                task_id=None,
                correlation="server",
                purpose="approval",
                approval=approval,
            )
        except BaseException:
            self.awaiting.pop(change.name, None)
            raise
        request_id = question.request_id
        self.awaiting[change.name] = request_id

        async def settle() -> None:  # not the model's call: its timeout must not withdraw the question
            try:
                with anyio.CancelScope() as waiting:  # but serve stopping does (`stop`)
                    self._settling.add(waiting)
                    try:
                        change.row = await self.questions.wait(question)
                    finally:
                        self._settling.discard(waiting)
                if change.row is not None and change.row["status"] == "accepted":
                    change.done = await change.make()
            except EmceepeeError as exc:
                change.error = exc
            except Exception as exc:  # the model must hear that the approved change failed, and why
                change.error = EmceepeeError(f"{change.tool}('{change.name}') failed: {exc!r}")
                raise
            finally:
                self.awaiting.pop(change.name, None)
                change.finished.set()
                if change.detached:
                    self.events.emit("server_change", None, outcome(change, request_id))

        self.runtime.spawn(settle, name=f"{change.tool} {change.name} approval")
        wait_s = min(
            self.defaults.timeout_ms if timeout_ms is None else timeout_ms, self.defaults.max_wait_ms
        )
        waiting = f"a person's approval of {change.tool}('{change.name}') (request {request_id})"
        try:
            with anyio.move_on_after(wait_s / 1000):
                if relay is None:
                    await change.finished.wait()
                else:  # the host hears from us while a person decides, as during execute_tool
                    await relay.beside(waiting, change.finished.wait)
        finally:  # its timeout, or the host cancelling the call: the outcome will come as an event
            change.detached = not change.finished.is_set()
        if change.detached:
            pending = outcome(change, request_id)
            pending["approval"]["by"] = approval["by"]
            return pending
        if change.error is not None:
            raise change.error
        return outcome(change, request_id)


def _refuse_secrets(spec: ServerSpec) -> None:
    """A secret the model gives is not written into emceepee's config (as `import` and `servers add`
    keep it out): the `${VAR}` form to use, and where a person puts the value."""
    found = secrets_in(spec)
    if not found:
        return
    fields = ", ".join(secret.field for secret in found)
    forms = ", ".join(f"{secret.field} = {secret.form!r}" for secret in found)
    raise UsageError(
        f"add_server('{spec.name}') would write a secret into emceepee's config file ({fields} looks "
        "like one). Nothing was started, written or asked.",
        hint=f"Refer to it instead ({forms}) and ask the user to set "
        + ", ".join(secret.var for secret in found)
        + " in the \"env\" block of emceepee's entry in their MCP client's config, then restart the "
        "client; or call add_server with persist=false, which runs it without saving anything.",
    )


def approvers(defaults: Defaults) -> tuple[str, ...]:
    """Who may accept a change: the people `approval_by` names; the model never."""
    return tuple(who for who in defaults.approval_by if who in PEOPLE) or PEOPLE


def outcome(change: Change, request_id: str) -> dict[str, Any]:
    """The change's result so far, as the model (or its event) gets it."""
    row = change.row
    status = "pending" if row is None else row["status"]
    approval: dict[str, Any] = {"request_id": request_id, "status": status}
    if row is not None and row.get("answered_by"):
        approval["answered_by"] = row["answered_by"]
    out: dict[str, Any] = {"change": change.tool, "server": change.name, "done": change.done is not None}
    if change.done is not None:
        out.update(change.done)
    if change.error is not None:
        out["error"] = change.error.message
    return {**out, "approval": approval}


def described(spec: ServerSpec, launch: Launch | None = None) -> dict[str, Any]:
    """What a person must see to approve starting or stopping `spec`: exactly what runs — the
    executable its PATH finds, its args, cwd and env (a value can change what runs: PATH,
    NODE_OPTIONS, UV_INDEX_URL…), a value that looks like a secret hidden — and only the names of a
    remote server's headers. `launch`: the host's environment and cwd it would start from, in the
    fleet (its cwd is then always shown: it is where the host is, not where emceepee is)."""
    if spec.url is not None:
        return {"name": spec.name, "url": spec.url, "header_names": sorted(spec.headers)}
    return {
        "name": spec.name,
        "command": spec.command,
        "executable": executable(spec, launch),
        "args": list(spec.args),
        "cwd": spec.cwd if launch is None else launch.cwd_for(spec.cwd),
        "env_names": sorted(spec.env),
        "env": shown_env(spec.env),
    }


def shown_env(env: dict[str, str]) -> dict[str, str]:
    """`env` as a person may see it: `${VAR}` as written (never expanded), a secret-looking value
    replaced by its length."""
    return {
        name: f"<hidden: {len(value)} characters>" if looks_secret(name, value) else value
        for name, value in sorted(env.items())
    }


def executable(spec: ServerSpec, launch: Launch | None = None) -> str | None:
    """The program `spec.command` names on the PATH the backend would get (its own env's PATH
    wins, else the host's in the fleet), or None if there is none there. A relative path
    (`./server.sh`) is taken from where it would start (the host's cwd in the fleet)."""
    environ = None if launch is None else launch.environ
    path = spec.env.get("PATH", backend_env({}, (), environ).get("PATH"))
    command = spec.command or ""
    if launch is not None and command:
        command = launch.command_for(command, launch.cwd_for(spec.cwd))
    return shutil.which(command, path=path)


def runs(spec: ServerSpec, verb: str = "run", launch: Launch | None = None) -> str:
    """`spec` in one line for a person: the whole command line, quoted as a shell would need it,
    with anything unprintable escaped, so nothing can hide in what is shown; with `launch`, as the
    host's session would run it (`executable`), in the host's working directory."""
    if spec.url is not None:
        headers = f" with headers {', '.join(sorted(spec.headers))}" if spec.headers else ""
        return f"{'connect' if verb == 'run' else 'connects'} to {visible(spec.url)}{visible(headers)}"
    line = f"{verb}: {visible(shlex.join([spec.command or '', *spec.args]))}"
    found = executable(spec, launch)
    if found != spec.command:
        line += f" ({visible(spec.command or '')} is {visible(found) if found else 'not found on its PATH'})"
    cwd = spec.cwd if launch is None else launch.cwd_for(spec.cwd)
    if cwd:
        line += f" in {visible(cwd)}"
    if spec.env:
        pairs = ", ".join(f"{name}={value}" for name, value in shown_env(spec.env).items())
        line += f", with environment variables {visible(pairs)}"
    return line


def visible(text: str) -> str:
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)
