"""The host's own MCP lists of what the backends offer: prompts, resources, templates, completion,
subscriptions and logs, for hosts that show them natively (a prompt picker, a resource browser).

Prompts appear as `server__prompt` (session/names.py); resources and templates keep their URIs, with
the server named in their `name`. A request is routed to the backend that listed the prompt, the
URI or the template; a subscription to a URI no backend lists goes to the one backend its
template, its scheme or a declared `resources.subscribe` singles out (`subscription_owner`). The
backend's answer goes back as it is (its own MCP objects, not emceepee's JSON), and so does its
error (server/native_requests.py). The host hears `list_changed` when a backend connects or its
lists change, `resources/updated` for URIs it subscribed to, and backend logs at or above the level
it set with `logging/setLevel` (none before it sets one: unasked, they would only be noise in the
host's log).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any, get_args

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.shared.uri_template import UriTemplate

from emceepee_cli.backends.backend import Backend, Status
from emceepee_cli.errors import NotFound, UsageError
from emceepee_cli.questions.host_link import HostLink
from emceepee_cli.runtime import Runtime
from emceepee_cli.session.names import name_table
from emceepee_cli.session.native_rounds import HostAsk, NativeRounds

log = logging.getLogger(__name__)

READY_WAIT_S = 10.0  # as list_tools waits for a backend still starting
LEVELS: tuple[str, ...] = get_args(types.LoggingLevel)  # least to most severe
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")  # RFC 3986's scheme, before the first colon


Peers = Callable[[Backend], "list[Native]"]  # the other host sessions a fleet's backend serves


class Native:
    def __init__(
        self,
        backends: dict[str, Backend],
        host: HostLink,
        runtime: Runtime,
        rounds: NativeRounds,
        peers: Peers = lambda backend: [],
    ) -> None:
        self.backends = backends
        # In the fleet (session/pool.py) a backend may serve other hosts' sessions too: it is given
        # the most verbose level any of them set (each host hears only what its own level lets
        # through), and a subscription is ended there only once no session holds it.
        self.peers = peers
        self.host = host
        self.runtime = runtime
        self.rounds = rounds  # a backend's questions while it answers prompts/get, resources/read
        self.level: str | None = None  # the host's logging/setLevel; None: it wants no backend logs
        self.subscribed: dict[str, str] = {}  # uri -> the server it was subscribed on

    def __repr__(self) -> str:
        return f"<Native level={self.level} subscribed={len(self.subscribed)}>"

    def _ready(self) -> list[Backend]:
        return [b for b in self.backends.values() if b.status == Status.READY]

    async def settled(self) -> None:
        """Wait (bounded) for backends still starting, so a host asking at once sees their offer."""
        with anyio.move_on_after(READY_WAIT_S):
            for backend in list(self.backends.values()):
                await backend.wait_ready(READY_WAIT_S, want=False)

    # ---- prompts ------------------------------------------------------------------------

    def prompt_table(self) -> dict[str, tuple[str, str]]:
        return name_table((b.name, p) for b in self._ready() for p in b.offer.prompts)

    def list_prompts(self) -> types.ListPromptsResult:
        prompts = []
        for exposed, (server, name) in self.prompt_table().items():
            prompt = self.backends[server].offer.prompts[name]
            description = f"[{server}] {prompt.description or prompt.title or name}"
            prompts.append(prompt.model_copy(update={"name": exposed, "description": description}))
        return types.ListPromptsResult(prompts=prompts)

    def _prompt(self, exposed: str) -> tuple[Backend, str]:
        found = self.prompt_table().get(exposed)
        if found is None:
            raise NotFound(f"No prompt '{exposed}'.", hint="prompts/list shows them as server__prompt.")
        return self.backends[found[0]], found[1]

    async def get_prompt(
        self, exposed: str, arguments: dict[str, str] | None, ask: HostAsk | None = None
    ) -> types.GetPromptResult | types.InputRequiredResult:
        """The backend's prompt; with `ask`, a 2026-07-28 host's questions come back in input rounds
        (session/native_rounds.py), and a 2026-07-28 backend's rounds are answered either way."""
        await self.settled()
        backend, name = self._prompt(exposed)

        async def send(s: ClientSession, responses: types.InputResponses | None, state: str | None) -> Any:
            return await s.get_prompt(
                name, arguments, input_responses=responses, request_state=state, allow_input_required=True
            )

        target = ("prompts/get", exposed, arguments)
        got: types.GetPromptResult | types.InputRequiredResult
        got = await self.rounds.request(backend, f"prompts/get '{name}'", send, target, ask)
        return got

    # ---- resources ------------------------------------------------------------------------

    def list_resources(self) -> list[types.Resource]:
        return [
            r.model_copy(update={"name": f"{b.name}: {r.name}"})
            for b in self._ready()
            for r in b.offer.resources
        ]

    def list_templates(self) -> list[types.ResourceTemplate]:
        return [
            t.model_copy(update={"name": f"{b.name}: {t.name}"})
            for b in self._ready()
            for t in b.offer.templates
        ]

    def owner(self, uri: str) -> Backend:
        """The backend that listed `uri`, else the first whose template matches it."""
        ready = self._ready()
        found = _listing(ready, uri) or _templated(ready, uri)
        if not found:
            raise NotFound(f"No backend lists the resource '{uri}'.", hint="resources/list shows them.")
        return found[0]

    def subscription_owner(self, uri: str) -> Backend:
        """The backend to subscribe to `uri` on: the one that lists it; else the only one left once
        narrowed down to those whose template matches it, whose URIs share its scheme, and that
        declare subscriptions (each narrowing that leaves none is skipped). A URI that more than one
        backend could take is refused, naming them: a guess would subscribe the host to the wrong one."""
        ready = self._ready()
        if listing := _listing(ready, uri):
            return listing[0]
        candidates = ready
        for narrowing in (_templated, _same_scheme, _subscribable):
            if len(candidates) <= 1:
                break
            candidates = narrowing(candidates, uri) or candidates
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            raise NotFound(f"No backend is ready to subscribe to '{uri}'.", hint="list_servers shows why.")
        names = ", ".join(b.name for b in candidates)
        raise UsageError(
            f"The resource '{uri}' could be on any of the servers {names}: none lists it, and neither "
            "its scheme nor a template tells which.",
            hint="Subscribe to a URI that resources/list or resources/templates/list shows.",
        )

    async def read_resource(
        self, uri: str, ask: HostAsk | None = None
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        """The backend's resource, its questions as `get_prompt`'s."""
        await self.settled()
        backend = self.owner(uri)

        async def send(s: ClientSession, responses: types.InputResponses | None, state: str | None) -> Any:
            return await s.read_resource(
                uri, input_responses=responses, request_state=state, allow_input_required=True
            )

        target = ("resources/read", uri, None)
        read: types.ReadResourceResult | types.InputRequiredResult
        read = await self.rounds.request(backend, f"resources/read '{uri}'", send, target, ask)
        return read

    async def subscribe(self, uri: str) -> None:
        await self.settled()
        backend = self.subscription_owner(uri)
        await backend.request(f"resources/subscribe '{uri}'", lambda s: s.subscribe_resource(uri))
        self.subscribed[uri] = backend.name

    async def unsubscribe(self, uri: str) -> None:
        """Unsubscribe where the host subscribed; a URI it did not subscribe to through emceepee (a
        subscription of an earlier session) goes where a subscription would."""
        if uri in self.subscribed:
            backend = self.backends.get(self.subscribed.pop(uri))
            if backend is None or backend.status != Status.READY:
                return  # gone, or restarting: it forgot the subscription
            if any(peer.subscribed.get(uri) == backend.name for peer in self.peers(backend)):
                return  # another host's session still holds it
        else:
            await self.settled()
            backend = self.subscription_owner(uri)
        await backend.request(f"resources/unsubscribe '{uri}'", lambda s: s.unsubscribe_resource(uri))

    # ---- completion -------------------------------------------------------------------------

    async def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        await self.settled()
        ref = params.ref
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = params.context.arguments if params.context is not None else None
        if isinstance(ref, types.PromptReference):
            backend, name = self._prompt(ref.name)
            ref = ref.model_copy(update={"name": name})
        else:
            backend = self._template_owner(ref.uri)
        sent = ref
        return await backend.request("completion/complete", lambda s: s.complete(sent, argument, context))

    def _template_owner(self, template: str) -> Backend:
        for backend in self._ready():
            if any(t.uri_template == template for t in backend.offer.templates):
                return backend
        raise NotFound(
            f"No backend lists the resource template '{template}'.", hint="See resources/templates/list."
        )

    # ---- logging ------------------------------------------------------------------------------

    async def set_level(self, level: str) -> None:
        """Keep the host's level and pass it on to every ready backend that takes one."""
        self.level = level
        for backend in self._ready():
            self._pass_level(backend)

    def _pass_level(self, backend: Backend) -> None:
        session = backend.session
        caps = session.server_capabilities if session is not None else None
        if self.level is not None and caps is not None and caps.logging is not None:
            wanted = [self.level, *(p.level for p in self.peers(backend) if p.level is not None)]
            level = min(wanted, key=lambda name: LEVELS.index(name) if name in LEVELS else len(LEVELS))
            self.runtime.spawn(_set_level, backend, level, name=f"setLevel {backend.name}")

    # ---- what the host hears -------------------------------------------------------------------

    def relay_log(self, server: str, level: str, message: str) -> None:
        if self.level is not None and level in LEVELS and LEVELS.index(level) >= LEVELS.index(self.level):
            params = types.LoggingMessageNotificationParams(level=level, logger=server, data=message)  # type: ignore[arg-type]  # level is checked against LEVELS above
            self._notify(types.LoggingMessageNotification(params=params))

    def relisted(self, listed: str) -> None:
        """A backend's list was read again after it said it changed: the host's list changed with it
        (told only now, so that the host, listing again at once, gets the new one)."""
        if listed == "prompts":
            self._notify(types.PromptListChangedNotification())
        elif listed == "resources":
            self._notify(types.ResourceListChangedNotification())

    def relay(self, server: str, method: str, params: dict[str, Any]) -> None:
        """A backend notification the host's own lists depend on."""
        if method == "notifications/resources/updated":
            uri = params.get("uri")
            if isinstance(uri, str) and self.subscribed.get(uri) == server:
                self._notify(
                    types.ResourceUpdatedNotification(params=types.ResourceUpdatedNotificationParams(uri=uri))
                )

    def connected(self, backend: Backend) -> None:
        """A backend became ready: its prompts and resources join the host's lists, and it gets the
        level the host set, if any (a backend that connects later, or restarted, would not know it)."""
        self._pass_level(backend)
        if backend.offer.prompts:
            self._notify(types.PromptListChangedNotification())
        if backend.offer.resources or backend.offer.templates:
            self._notify(types.ResourceListChangedNotification())
        for uri, server in self.subscribed.items():  # a restarted backend forgot them
            if server == backend.name:
                self.runtime.spawn(_resubscribe, backend, uri, name=f"resubscribe {uri}")

    def _notify(self, notification: types.ServerNotification) -> None:
        if self.host.session is not None and self.host.can_send():
            self.runtime.spawn(_send, self.host, notification, name=f"host {notification.method}")


def _listing(backends: list[Backend], uri: str) -> list[Backend]:
    return [b for b in backends if any(str(r.uri) == uri for r in b.offer.resources)]


def _templated(backends: list[Backend], uri: str) -> list[Backend]:
    return [b for b in backends if any(_matches(t.uri_template, uri) for t in b.offer.templates)]


def _matches(template: str, uri: str) -> bool:
    try:
        return UriTemplate.parse(template).match(uri) is not None
    except ValueError:
        return False  # a template the SDK cannot parse matches nothing


def _same_scheme(backends: list[Backend], uri: str) -> list[Backend]:
    """The backends that list a resource or template in the scheme of `uri` (`surface` of
    `surface://counter`); none for a URI without one."""
    scheme = _scheme(uri)
    if scheme is None:
        return []
    return [b for b in backends if scheme in _schemes(b)]


def _schemes(backend: Backend) -> set[str | None]:
    offered = [str(r.uri) for r in backend.offer.resources] + [
        t.uri_template for t in backend.offer.templates
    ]
    return {_scheme(uri) for uri in offered}


def _scheme(uri: str) -> str | None:
    found = _SCHEME.match(uri)
    return found.group(1).lower() if found else None


def _subscribable(backends: list[Backend], uri: str) -> list[Backend]:
    """The backends that declare `resources.subscribe`."""
    return [b for b in backends if _takes_subscriptions(b)]


def _takes_subscriptions(backend: Backend) -> bool:
    caps = backend.session.server_capabilities if backend.session is not None else None
    return bool(caps is not None and caps.resources is not None and caps.resources.subscribe)


async def _send(host: HostLink, notification: types.ServerNotification) -> None:
    assert host.session is not None
    try:
        await host.session.send_notification(notification)
    except Exception as exc:  # noqa: BLE001 - the host may be gone; a lost notification is not an error
        log.debug("could not send %s to the host: %r", notification.method, exc)


async def _set_level(backend: Backend, level: str) -> None:
    request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))  # type: ignore[arg-type]  # checked by the host's request schema

    async def send(session: ClientSession) -> types.EmptyResult:
        return await session.send_request(request, types.EmptyResult)

    try:
        await backend.request("logging/setLevel", send)
    except Exception as exc:  # noqa: BLE001 - a backend that cannot set its level keeps its own
        log.debug("backend %s: logging/setLevel failed: %r", backend.name, exc)


async def _resubscribe(backend: Backend, uri: str) -> None:
    try:
        await backend.request(f"resources/subscribe '{uri}'", lambda s: s.subscribe_resource(uri))
    except Exception as exc:  # noqa: BLE001 - the host keeps its subscription; updates may not come
        log.warning("backend %s: re-subscribing to %s failed: %r", backend.name, uri, exc)
