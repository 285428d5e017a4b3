"""`emceepee auth …`: sign in to a remote server from a terminal, see each remote server's sign-in,
and forget one; and `Terminal`, the person at this terminal a sign-in asks (signin/flow.py's
`Person`), whom `auth login`, `call` and `tools` give it.

A sign-in here is the one serve does (signin/flow.py): `login` forgets the tokens kept for the
server (keeping its client registration), connects, and the server's 401 starts the flow; the link
is printed on stderr and opened in the browser (`$BROWSER` is honoured). What is shown of a
sign-in is its state (signin/store.py's `SignInState`): never a token.
"""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, Annotated, Any

import typer

from emceepee_cli.cli.framework.options import ConfigOpt, JsonOpt
from emceepee_cli.cli.host_vars import from_hosts
from emceepee_cli.cli.terminal import render

if TYPE_CHECKING:
    from pathlib import Path

    from emceepee_cli.config import Config, ServerSpec
    from emceepee_cli.signin.flow import Patience
    from emceepee_cli.signin.store import SignInState

app = typer.Typer(
    help="Sign in to remote servers, see each one's sign-in, and sign out.", no_args_is_help=True
)

ServerArg = Annotated[
    str,
    typer.Argument(
        metavar="SERVER",
        help="A remote server's name, as `emceepee servers list` shows it.",
        show_default=False,
    ),
]
CONNECT_S = 60.0  # reaching the server, its handshake, the token exchange: the person's time aside


class Terminal:
    """The person at this terminal: shown the sign-in link on stderr (and in the browser, unless
    `browser` is off); gives up with Ctrl-C, which ends the command. `patience`: the connection's
    time limits their sign-in does not count against (a backend's own are paused by it)."""

    def __init__(self, browser: bool = True, patience: Patience | None = None) -> None:
        self.browser = browser
        self.patience = patience
        self.shown: set[str] = set()  # the servers that asked for a sign-in

    def __repr__(self) -> str:
        return f"<Terminal browser={self.browser} shown={sorted(self.shown)}>"

    async def show(self, server: str, url: str) -> None:
        from emceepee_cli.signin.browser import open_browser
        from emceepee_cli.signin.flow import SIGNIN_WINDOW_S, authorization_target

        self.shown.add(server)
        if self.patience is not None:
            self.patience.pause()
        render.clear_status()
        asks = f"'{server}' asks you to sign in at {authorization_target(url)}."
        if self.browser:
            open_browser(url)
            render.warn(f"{asks} emceepee opened this link in your browser; if no page appeared, open it")
            render.warn("in a browser on this machine (the sign-in comes back to 127.0.0.1):")
        else:
            render.warn(f"{asks} Open this link in a browser on this machine (it comes back to 127.0.0.1):")
        render.warn(f"  {url}")
        render.note(f"(waiting up to {SIGNIN_WINDOW_S / 60:g} minutes for the sign-in; Ctrl-C gives up)")

    async def declined(self, server: str) -> str:
        """Never: Ctrl-C, the way to give up here, ends the command itself."""
        import anyio

        await anyio.sleep_forever()
        return ""

    async def done(self, server: str, signed_in: bool) -> None:
        if self.patience is not None:
            self.patience.resume()
        if signed_in:
            render.note(f"Signed in to '{server}'.")


# ---- the config's remote servers ---------------------------------------------------------------


def _config_path(config: Path | None) -> Path:
    from emceepee_cli import paths

    return paths.config_path(config)


def _load(path: Path) -> Config:
    """The config; call it within `from_hosts`, so a `${VAR}` set only for a host counts as set."""
    from emceepee_cli import config as config_mod

    return config_mod.load_config(path)


def _remote(loaded: Config, server: str) -> ServerSpec:
    """The expanded spec of the remote server `server` that signs in; anything else is refused
    with what to do instead."""
    from emceepee_cli.cli.server_rows import problem_text
    from emceepee_cli.config.model import unknown_server
    from emceepee_cli.errors import ConfigError, UsageError
    from emceepee_cli.signin import flow

    broken = [problem_text(p, loaded.path) for p in loaded.problems if p.server == server]
    if broken:
        raise ConfigError(
            "; ".join(broken),
            hint=f"Fix it, then run `emceepee auth login {server}` again (emceepee servers show {server}).",
        )
    if server not in loaded.servers:
        hint = f"Add it with: emceepee servers add {server} --url URL"
        raise unknown_server(server, _remote_names(loaded), hint)
    spec = loaded.servers[server]
    if spec.url is None:
        raise UsageError(
            f"'{server}' is a local (stdio) server: only remote servers sign in.",
            hint="A local server takes its credentials from its `env` table (emceepee servers show "
            f"{server}).",
        )
    if not flow.signs_in(spec):
        raise UsageError(
            f"'{server}' uses the Authorization header of its config, so emceepee does not sign in to it.",
            hint=f"To sign in instead, remove that header: emceepee servers show {server}, then edit "
            f"{loaded.path}.",
        )
    return spec.expanded()


def _sign_in_state(spec: ServerSpec) -> dict[str, Any]:
    """What `auth status` says of one remote server: its state as a word, and the stored sign-in
    (expiry, scopes); never a token. `spec` as written (its URL is shown unexpanded)."""
    from emceepee_cli.errors import ConfigError
    from emceepee_cli.signin import flow

    row: dict[str, Any] = {"server": spec.name, "url": spec.url}
    if not flow.signs_in(spec):
        return row | {"state": "static_header", "detail": "uses the Authorization header of its config"}
    try:
        store = flow.store_for(spec.expanded())
    except ConfigError as exc:
        return row | {"state": "unknown", "detail": exc.message, "hint": exc.hint}
    state = store.state()
    row |= {key: value for key, value in state.to_json().items() if key not in ("server", "url")}
    row |= _described(spec.name, state)
    loose = _loose_mode(store.path)
    if loose is not None:
        row["warning"] = loose
    return row


def _described(server: str, state: SignInState) -> dict[str, Any]:
    """The state as a word for scripts, a few for people, and the command that signs in when one
    is needed."""
    login = {"hint": f"emceepee auth login {server}"}
    if state.other_url:
        return {"state": "other_url", "detail": "kept for another URL: not used"} | login
    if not state.signed_in:
        return {"state": "not_signed_in", "detail": "not signed in"} | login
    if state.expired and state.refreshable:
        return {"state": "expired", "detail": "expired: renews by itself"}
    if state.expired:
        return {"state": "expired", "detail": "expired: sign in again"} | login
    return {"state": "signed_in", "detail": "signed in"}


def _loose_mode(path: Path) -> str | None:
    """A warning when the token file can be read by other users (emceepee writes it 0600)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None
    if os.name == "nt" or not mode & 0o077:
        return None
    return f"{path} is readable by others (mode {oct(mode)}): chmod 600 {path}"


# ---- the commands -------------------------------------------------------------------------------


@app.command("login")
def login(
    server: ServerArg,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the link only; do not open a browser.")
    ] = False,
    config: ConfigOpt = None,
    json: JsonOpt = False,
) -> None:
    """Sign in to a remote server, in your browser.

    The tokens kept for it are forgotten first (its client registration is kept); then emceepee
    connects, and the server's request to sign in starts the sign-in. $BROWSER names the browser.
    A running serve uses the new tokens when it next connects to the server.
    """
    import anyio

    from emceepee_cli.errors import BackendError
    from emceepee_cli.signin import flow

    path = _config_path(config)
    with from_hosts(path):
        loaded = _load(path)
        spec = _remote(loaded, server)
        flow.store_for(spec).forget_tokens()
        person = Terminal(browser=not no_browser, patience=flow.Patience())
        try:
            anyio.run(_connect, spec, person)
        except KeyboardInterrupt:
            render.clear_status()
            render.warn(
                f"Gave up signing in to '{server}': it is not signed in (its old tokens were forgotten)."
            )
            raise
    state = flow.store_for(spec).state()
    asked = server in person.shown
    if asked and not state.signed_in:  # the server took emceepee in, yet nothing was kept
        raise BackendError(
            f"The sign-in to '{server}' ended without tokens being kept ({flow.store_for(spec).path}).",
            hint=f"Check that emceepee's data folder can be written (emceepee paths), then run `emceepee "
            f"auth login {server}` again.",
        )
    row = {"server": server, "url": loaded.server(server).url}
    if json:
        render.as_json(
            row | {k: v for k, v in state.to_json().items() if k not in ("server", "url")} | {"asked": asked}
        )
        return
    if not asked:
        render.line(f"'{server}' did not ask for sign-in: it let emceepee in without it. Nothing was stored.")
        return
    render.line(f"Signed in to '{server}' ({row['url']}).")
    render.fields(_facts(state))


def _facts(state: SignInState) -> list[tuple[str, str]]:
    return [
        ("expires", state.expires_at or "(the server did not say)"),
        ("scopes", " ".join(state.scopes) or "(none named)"),
        (
            "renews",
            "by itself, with its refresh token" if state.refreshable else "no: sign in again when it ends",
        ),
    ]


async def _connect(spec: ServerSpec, person: Terminal) -> None:
    """Connect to the expanded `spec` as a backend would, so that its server's 401 starts the
    sign-in (with `person`); every way it can fail is an error saying what to do."""
    import anyio
    import httpx2
    from mcp import ClientSession

    from emceepee_cli.backends import connect
    from emceepee_cli.calls.oneshot import quiet_sign_in_log
    from emceepee_cli.signin import flow

    quiet_sign_in_log()
    auth = flow.auth_for(spec, person)
    assert auth is not None  # `_remote` let only a server that signs in through
    refused: list[int] = []
    failed: list[str] = []

    async def final(response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            refused.append(response.status_code)

    auth.on_final, auth.on_failed = final, failed.append
    try:
        with anyio.fail_after(CONNECT_S) as limit:  # the person's time, bounded by the sign-in, aside
            if person.patience is not None:
                person.patience.watch(limit, CONNECT_S)
            opened = connect.open_transport(
                spec, log=None, on_stderr=_ignore, on_problem=_ignore, auth=auth, patience=person.patience
            )
            async with opened as (streams, _), ClientSession(*streams) as session:
                await connect.handshake(session, spec.protocol)
    except Exception as exc:  # noqa: BLE001 - each way it fails is said, with what to do
        raise _failure(spec, exc, refused, failed) from None


def _ignore(text: str) -> None:
    return None


def _failure(spec: ServerSpec, exc: Exception, refused: list[int], failed: list[str]) -> Exception:
    """What a sign-in that ended without a connection says: the sign-in's own error, the server
    refusing the new token, the server out of reach, or the failure as it came."""
    import httpx2

    from emceepee_cli.backends.failures import describe, leaves
    from emceepee_cli.errors import BackendError, BackendUnavailable
    from emceepee_cli.signin.loopback import SignInError

    name = spec.name
    again = f"Run `emceepee auth login {name}` again"
    found = leaves(exc)
    own = [e for e in found if isinstance(e, SignInError)]
    if own:
        return own[0]
    if refused:
        return BackendError(
            f"'{name}' refused emceepee's new token (HTTP {refused[-1]}).",
            hint=f"{again}; if it keeps refusing, `emceepee auth logout {name}` forgets the client "
            "registration too, so the next sign-in registers afresh.",
        )
    if failed:
        return BackendError(failed[0], hint=f"{again}; `emceepee auth logout {name}` starts afresh.")
    if any(isinstance(e, httpx2.ConnectError) for e in found):
        return BackendUnavailable(
            f"Cannot reach '{name}' at {spec.url}: {describe(exc)}.",
            hint=f"Check that the server is up and its URL is right (emceepee servers show {name}), then "
            "try again.",
        )
    if any(isinstance(e, TimeoutError) for e in found):
        return BackendUnavailable(
            f"'{name}' did not answer within {CONNECT_S:g} s (besides the time you took to sign in).",
            hint=f"Check that the server is up and its URL is right (emceepee servers show {name}), then "
            "try again.",
        )
    return BackendError(
        f"Could not connect to '{name}' to sign in: {describe(exc)}",
        hint=f"Check its URL (emceepee servers show {name}); {again[0].lower()}{again[1:]}.",
    )


@app.command("status")
def status(
    server: Annotated[
        str | None,
        typer.Argument(
            metavar="SERVER", help="Only this server (default: every remote one).", show_default=False
        ),
    ] = None,
    config: ConfigOpt = None,
    json: JsonOpt = False,
) -> None:
    """Show each remote server's sign-in (never a token).

    Signed in (until when, with which scopes), expired (and whether it renews by itself), not
    signed in, kept for another URL, or using a static Authorization header instead.
    """
    from emceepee_cli.errors import UsageError

    path = _config_path(config)
    with from_hosts(path):
        loaded = _load(path)
        if server is not None and loaded.server(server).url is None:
            raise UsageError(f"'{server}' is a local (stdio) server: only remote servers sign in.")
        specs = [s for s in loaded.servers.values() if s.url is not None and server in (None, s.name)]
        rows = [_sign_in_state(spec) for spec in specs]
    others = [] if server is not None else _kept_for_others(loaded)
    if json:
        render.as_json({"servers": rows, "kept_for_others": others})
        return
    table = [
        (row["server"], row["detail"], row.get("expires_at"), " ".join(row.get("scopes", ())), row["url"])
        for row in rows
    ]
    render.table(
        None,
        ("server", "sign-in", "expires", "scopes", "url"),
        table,
        empty="No remote servers in the config.",
    )
    for row in rows:
        if row.get("warning"):
            render.warn(row["warning"])
    waiting = [row["server"] for row in rows if row.get("hint")]
    if len(waiting) == 1:
        render.note(f"(sign in with: emceepee auth login {waiting[0]})")
    elif waiting:
        render.note(f"(sign in with: emceepee auth login NAME, for {', '.join(waiting)})")
    if others:
        render.note(
            f"(kept for servers not in the config: {', '.join(others)}; forget with: "
            f"emceepee auth logout {others[0]})"
        )


def _kept_for_others(loaded: Config) -> list[str]:
    """The token files of servers the config no longer names (by file name)."""
    from emceepee_cli.signin.store import file_for, stored_servers

    named = {file_for(name).stem for name in loaded.servers}
    return [stem for stem in stored_servers() if stem not in named]


@app.command("logout")
def logout(
    server: Annotated[
        str | None,
        typer.Argument(metavar="SERVER", help="The server to sign out of.", show_default=False),
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Sign out of every server.")] = False,
    config: ConfigOpt = None,
    json: JsonOpt = False,
) -> None:
    """Forget a server's sign-in: its tokens and client registration.

    The next connection to it asks you to sign in again. A running serve keeps the tokens it holds
    until it next connects.
    """
    from emceepee_cli.errors import UsageError

    if all_ == (server is not None):
        raise UsageError("Name one server, or give --all.", hint="See: emceepee auth logout --help")
    forgotten = _forget_all() if all_ else _forget(server or "", config)
    if json:
        render.as_json({"forgotten": forgotten})
        return
    if not forgotten:
        render.line(f"Nothing was kept for {'any server' if all_ else repr(server)}: nothing to forget.")
        return
    render.line(
        f"Forgot the sign-in kept for {', '.join(repr(name) for name in forgotten)} (its tokens and "
        "client registration). The next connection asks you to sign in again."
    )


def _forget(server: str, config: Path | None) -> list[str]:
    from emceepee_cli.config.model import unknown_server
    from emceepee_cli.errors import EmceepeeError
    from emceepee_cli.signin.store import TokenStore, file_for, stored_servers

    loaded = _load(_config_path(config))
    kept = file_for(server).stem in stored_servers()
    if not kept and server not in loaded.servers and server not in _raw_names(loaded):
        raise unknown_server(server, _remote_names(loaded), "See them with: emceepee auth status")
    store = TokenStore(server, "")
    try:
        return [server] if store.forget() else []
    except OSError as exc:
        raise EmceepeeError(
            f"Cannot forget the sign-in of '{server}': {exc.strerror} ({store.path}).",
            hint=f"Remove {store.path} yourself.",
        ) from None


def _remote_names(loaded: Config) -> dict[str, None]:
    """The remote servers the config file names, those with a problem too, in its order."""
    from emceepee_cli.cli.server_rows import raw_servers

    return {name: None for name, table in raw_servers(loaded.path).items() if "url" in table}


def _raw_names(loaded: Config) -> set[str]:
    """Every server the config file names, those with a problem too."""
    return {p.server for p in loaded.problems if p.server is not None}


def _forget_all() -> list[str]:
    from emceepee_cli.signin.store import folder

    forgotten = []
    for path in sorted(folder().glob("*.json")):
        try:
            path.unlink()
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            continue
        forgotten.append(path.stem)
    return forgotten
