"""`emceepee doctor`: every check, each with its state and the command that fixes it.

A failure is something that stops emceepee working under a host; a note is worth knowing but
not wrong (a host that is not installed, a server switched off, no serve running). Backends are
started the way a host would start them, not the way this shell would: with the small
environment a host gives emceepee (`catalog.host_path()` for PATH, plus the `env` block of
emceepee's entry in the hosts' configs), so "works in my shell, fails in the host" shows here.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from emceepee_cli.backends.logfile import LogFolder
from emceepee_cli.config import Config, ServerSpec
from emceepee_cli.errors import ConfigError, EmceepeeError, JournalError
from emceepee_cli.hosts import catalog
from emceepee_cli.signin.flow import Nobody
from emceepee_cli.signin.store import TokenStore

if TYPE_CHECKING:
    from emceepee_cli.rendezvous import Place

State = Literal["ok", "fail", "note"]
PASSED_ON = ("HOME", "LOGNAME", "SHELL", "TERM", "USER")  # what a host's environment has besides PATH
# Where this emceepee keeps its data (the token files a backend's sign-in reads): kept while
# backends start in a host's environment, so doctor reads the sign-ins `emceepee auth` wrote.
OWN_PLACES = ("EMCEEPEE_HOME", "XDG_DATA_HOME")
TAIL_LINES = 5
UNSET = "} is not set"  # how config/expand.py says a `${VAR}` has no value
FLEET_ANSWER_S = 5.0  # a fleet answers its status at once; a loaded machine is slow


@dataclass(frozen=True)
class Check:
    area: str  # config, journal, key, backend, host, serve, fleet
    name: str
    state: State
    detail: str
    fix: str | None = None

    def json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


# ---- config ------------------------------------------------------------------------------------


def config_checks(path: Path, host_env: Mapping[str, str]) -> tuple[list[Check], Config | None]:
    """The config's checks. A `${VAR}` counts as set here if this shell or a host's entry sets it:
    which of the two a backend really gets is the backend check's business."""
    from emceepee_cli import config as config_mod

    if not path.exists():
        fix = "emceepee servers add NAME -- COMMAND [ARGS…], or emceepee import HOST"
        return [Check("config", str(path), "note", "no config file yet: no backends", fix)], None
    try:
        with environment({**os.environ, **host_env}):
            loaded = config_mod.load_config(path)
    except ConfigError as exc:
        return [Check("config", str(path), "fail", exc.message, f"edit {path} ({exc.hint})")], None
    checks = [Check("config", str(path), "ok", f"{len(loaded.servers)} server(s) can start")]
    for problem in loaded.problems:
        where = ", ".join(
            x
            for x in (
                problem.server and f"server '{problem.server}'",
                problem.field and f"field '{problem.field}'",
            )
            if x
        )
        fix = (
            f"emceepee servers show {problem.server}, then edit {path}" if problem.server else f"edit {path}"
        )
        if problem.server and UNSET in problem.message:  # the value is right: the variable is missing
            fix = _env_fix(_unset_var(problem.message))
        checks.append(Check("config", where or str(path), "fail", problem.message, fix))
    return checks, loaded


# ---- journal -----------------------------------------------------------------------------------


def journal_checks(path: Path) -> list[Check]:
    from emceepee_cli.store import inspect
    from emceepee_cli.store.faults import writable_problem

    try:
        status = inspect.status(path)
    except JournalError as exc:  # its hint is the command that fixes it (store/faults.py)
        return [Check("journal", str(path), "fail", exc.message, exc.hint)]
    if not status["exists"]:
        return [
            Check("journal", str(path), "note", "no journal yet (made by the first serve or tasks command)")
        ]
    checks = []
    if status["health"] != "ok":
        checks.append(
            Check("journal", str(path), "fail", f"damaged: {status['health']}", f"mv {path} {path}.broken")
        )
    read_only = writable_problem(path)
    if read_only is not None:  # readable, but serve would run from memory and the CLI not record
        checks.append(Check("journal", str(path), "fail", read_only.message, read_only.hint))
    unknown = sorted(set(status["migrations"]) - known_migrations())
    if unknown:
        checks.append(
            Check(
                "journal",
                str(path),
                "fail",
                f"written by a newer emceepee ({', '.join(unknown)})",
                "upgrade emceepee",
            )
        )
    if not status["private"]:
        checks.append(
            Check(
                "journal",
                str(path),
                "fail",
                f"readable by others (mode {status['mode']})",
                f"chmod 600 {path}",
            )
        )
    if not checks:
        counts = status.get("counts", {})
        tasks = sum(counts.get("tasks", {}).values()) if isinstance(counts.get("tasks"), dict) else 0
        waiting = (
            counts.get("pending", {}).get("pending", 0) if isinstance(counts.get("pending"), dict) else 0
        )
        size = f"{status['bytes'] / 1024:.0f} KiB"
        detail = (
            f"healthy, {len(status['migrations'])} migrations, {size}, "
            f"{tasks} task(s), {waiting} question(s) waiting"
        )
        checks.append(Check("journal", str(path), "ok", detail))
    return checks


def key_checks(folder: Path | None = None) -> list[Check]:
    """The install key that signs saga and resume tokens: usable, and readable by this user only
    (anyone who can read it can sign tokens that serve accepts)."""
    from emceepee_cli import paths, seal

    path = (folder or paths.data_dir()) / seal.KEY_FILE
    try:
        seal.read_key(path)
    except FileNotFoundError:
        return [Check("key", str(path), "note", "no install key yet (made by the first serve)")]
    except seal.InstallKeyError as exc:
        remove = "rm -r" if path.is_dir() else "rm"
        fix = f"{remove} {path} (a new one is made; tokens signed with the old one stop working)"
        return [Check("key", str(path), "fail", exc.message, fix)]
    mode = stat.S_IMODE(path.stat().st_mode)
    if os.name != "nt" and mode & 0o077:
        detail = f"readable by others (mode {oct(mode)}): they could sign tokens emceepee accepts"
        return [Check("key", str(path), "fail", detail, f"chmod 600 {path}")]
    return [Check("key", str(path), "ok", "usable, readable by this user only")]


def known_migrations() -> set[str]:
    import sqlite_utils

    from emceepee_cli.store.migrations import migrations

    return {m.name for m in migrations.pending(sqlite_utils.Database(memory=True))}


# ---- hosts ---------------------------------------------------------------------------------------


def _entry(doc: Any, host: catalog.Host) -> tuple[str, dict[str, Any]] | None:
    servers = doc.data.get(host.servers_key)
    if not isinstance(servers, dict):
        return None
    for name, entry in servers.items():
        if isinstance(entry, dict) and catalog.is_emceepee(name, entry):
            return name, entry
    return None


def host_checks() -> tuple[list[Check], dict[str, str]]:
    """A check per host, and the environment emceepee's entries give it (merged)."""
    from emceepee_cli.hosts import config_file

    checks: list[Check] = []
    env: dict[str, str] = {}
    this = catalog.serve_command()
    for host in catalog.HOSTS.values():
        path = host.path()
        try:
            doc = config_file.read(path)
        except ConfigError as exc:
            checks.append(Check("host", host.title, "fail", exc.message, f"fix {path}"))
            continue
        if not doc.exists:
            checks.append(Check("host", host.title, "note", f"not installed here (no {path})"))
            continue
        found = _entry(doc, host)
        if found is None:
            checks.append(
                Check(
                    "host", host.title, "note", f"no emceepee entry in {path}", f"emceepee install {host.key}"
                )
            )
            continue
        name, entry = found
        env |= {str(k): str(v) for k, v in (entry.get("env") or {}).items()}
        checks.append(_entry_check(host, path, name, entry, this))
    return checks, env


def _entry_check(host: catalog.Host, path: Path, name: str, entry: dict[str, Any], this: list[str]) -> Check:
    command = str(entry.get("command") or "")
    args = [str(a) for a in entry.get("args") or []]
    found = catalog.resolve(command) if command else None
    fix = f"emceepee install {host.key}"
    if found is None or not found.for_host:
        starts = command or "(no command)"
        detail = f"'{name}' starts {starts}, which a host cannot run (PATH {catalog.host_path()})"
        return Check("host", host.title, "fail", detail, fix)
    if "serve" not in args:
        return Check(
            "host", host.title, "fail", f"'{name}' runs {shlex.join([command, *args])}, without `serve`", fix
        )
    if [command, *args[: len(this) - 1]] != this:
        detail = f"'{name}' starts another emceepee ({command}); this one is {this[0]}"
        return Check("host", host.title, "note", detail, f"{fix} (to use this one)")
    return Check("host", host.title, "ok", f"'{name}' in {path} starts this emceepee")


# ---- serves --------------------------------------------------------------------------------------


def serve_checks(db: Path) -> list[Check]:
    from emceepee_cli.store import inspect
    from emceepee_cli.store.liveness import instance_alive

    checks = []
    try:
        running = inspect.instances(db)
    except JournalError:
        return [Check("serve", "serve", "note", "unknown: the journal cannot be read (see above)")]
    for row in running:
        if instance_alive(row):
            host = row.get("host_name") or "an unknown host"
            checks.append(
                Check("serve", f"pid {row['pid']}", "ok", f"running for {host} since {row['started_at']}")
            )
    return checks or [Check("serve", "serve", "note", "no emceepee serve is running (a host starts one)")]


# ---- the fleet -------------------------------------------------------------------------------------


def fleet_checks(config_path: Path, db: Path) -> list[Check]:
    """Whether `serve` goes through the fleet for this config (and who said so), its runtime folder,
    whether a fleet runs for this config (asked over its socket: never started), and the sockets
    of other emceepee versions' fleets. Trouble is a failure only while the fleet is on: off, it is
    not used (emceepee_cli/rendezvous.py says what each refusal means)."""
    from emceepee_cli import rendezvous
    from emceepee_cli.config.load import fleet_settings

    on, said = rendezvous.switch(config_path, fleet_settings(config_path).enabled)
    if on:
        checks = [Check("fleet", "switch", "ok", f"on ({said}): each host's serve relays to the fleet")]
    else:
        detail = f"off ({said}): each host's serve runs in-process"
        checks = [Check("fleet", "switch", "note", detail)]
    where = rendezvous.place(config_path.absolute(), db.absolute())
    folder = _runtime_check(where, on)
    checks.append(folder)
    if folder.state == "ok":
        checks.append(_fleet_alive(where, on))
        checks += _other_versions(where)
    return checks


def _refused(area: str, name: str, exc: Exception, on: bool) -> Check:
    """A rendezvous refusal as a check: its message, and the fix it names after "To fix: "."""
    detail, _, fix = str(exc).partition(" To fix: ")
    return Check(area, name, "fail" if on else "note", detail.rstrip("."), fix or None)


def _runtime_check(where: Place, on: bool) -> Check:
    from emceepee_cli import rendezvous

    name = str(where.folder)
    if not where.folder.exists():
        return Check("fleet", name, "note", "not made yet: the first fleet makes it (0700)")
    try:
        rendezvous.check_dir(where.folder)
    except rendezvous.Refused as exc:
        return _refused("fleet", name, exc, on)
    if not os.access(where.folder, os.W_OK | os.X_OK):
        detail = "this user cannot make the fleet's socket in it: serve runs in-process"
        return Check("fleet", name, "fail" if on else "note", detail, f"chmod 700 {where.folder}")
    return Check("fleet", name, "ok", "the fleet's folder: this user's, closed to others (0700)")


def _fleet_alive(where: Place, on: bool) -> Check:
    """Whether a fleet serves this config and journal: its pid, version, uptime and hosts."""
    from emceepee_cli import rendezvous
    from emceepee_cli.clock import age

    try:
        found = rendezvous.control(where, "status", FLEET_ANSWER_S)
    except rendezvous.Refused as exc:
        return _refused("fleet", where.sock.name, exc, on)
    if found is None:
        return Check("fleet", "fleet", "note", "none runs for this config (a host's serve starts one)")
    hosts = [(h.get("client") or {}).get("name") or "a host" for h in found["hosts"]]
    detail = (
        f"pid {found['pid']}, emceepee {found['version']}, up {age(found['started'])}, "
        f"{len(hosts)} host(s) connected{': ' + ', '.join(hosts) if hosts else ''}"
    )
    return Check("fleet", "fleet", "ok", detail)


def _other_versions(where: Place) -> list[Check]:
    """A socket of another emceepee version's fleet: still running (it leaves once idle), or stale."""
    from emceepee_cli import rendezvous

    mine = rendezvous.version_of(where)
    checks = []
    for other in rendezvous.places(where.folder):
        version = rendezvous.version_of(other)
        if version == mine:
            continue
        try:
            pid = rendezvous.live_pid(other) if rendezvous.check_socket(other.sock) else None
        except rendezvous.Refused as exc:
            checks.append(_refused("fleet", other.sock.name, exc, on=False))
            continue
        if pid is not None:
            detail = f"a fleet of emceepee {version} (pid {pid}) still runs: it leaves once no host uses it"
            checks.append(Check("fleet", other.sock.name, "note", detail))
        else:
            detail = f"a stale socket of emceepee {version}'s fleet: nobody listens on it"
            checks.append(Check("fleet", other.sock.name, "note", detail, f"rm {other.sock}"))
    return checks


# ---- sign-in -------------------------------------------------------------------------------------


def signin_checks(loaded: Config, host_env: Mapping[str, str]) -> list[Check]:
    """The sign-in kept for each enabled remote server that signs in (its token file, read as
    `emceepee auth status` reads it): never a token. Not being signed in is a note: a server signs
    in only when it asks, which only connecting tells (the backend check)."""
    from emceepee_cli.signin import flow

    checks = []
    for spec in loaded.servers.values():
        if not spec.enabled or not flow.signs_in(spec):
            continue
        try:
            store = flow.store_for(spec.expanded({**os.environ, **host_env}))
        except ConfigError:
            continue  # a `${VAR}` set nowhere: the config check says so
        checks.append(_signin_check(spec.name, store))
    return checks


def _signin_check(name: str, store: TokenStore) -> Check:
    state = store.state()
    login = f"emceepee auth login {name}"
    mode = _mode(store.path)
    if mode is not None and os.name != "nt" and mode & 0o077:
        detail = f"{store.path} is readable by others (mode {oct(mode)}): it holds its tokens"
        return Check("sign-in", name, "fail", detail, f"chmod 600 {store.path}")
    if state.other_url:
        return Check(
            "sign-in", name, "note", "tokens kept for another URL (the config's changed): unused", login
        )
    if not state.signed_in:
        return Check("sign-in", name, "note", "not signed in (needed only if its server asks)", login)
    scopes = f" (scopes: {' '.join(state.scopes)})" if state.scopes else ""
    if state.expired and state.refreshable:
        detail = f"expired at {state.expires_at}; renewed without you at the next connection{scopes}"
        return Check("sign-in", name, "ok", detail)
    if state.expired:
        return Check("sign-in", name, "note", f"expired at {state.expires_at}, and cannot be renewed", login)
    until = f" until {state.expires_at}" if state.expires_at else ""
    return Check("sign-in", name, "ok", f"signed in{until}{scopes}")


def _mode(path: Path) -> int | None:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


class NobodyAsked(Nobody):
    """doctor's person: nobody (doctor never prompts), remembering which servers asked for a sign-in."""

    def __init__(self) -> None:
        self.asked: set[str] = set()

    async def show(self, server: str, url: str) -> None:
        self.asked.add(server)
        await super().show(server, url)


# ---- backends ----------------------------------------------------------------------------------


def host_environment(extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: os.environ[k] for k in (*PASSED_ON, *OWN_PLACES) if k in os.environ}
    env["PATH"] = catalog.host_path()
    return env | dict(extra)


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """This process's environment replaced by `env` for a while (backends inherit from it)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def precheck(spec: ServerSpec, env: Mapping[str, str], config: Sequence[str] = ()) -> Check | None:
    """What stops `spec` before it is even started, in a host's environment `env`."""
    try:
        spec.expanded(env)
    except ConfigError as exc:
        var = _unset_var(exc.message)
        shell = " (it is set in this shell, not for the host)" if var in os.environ else ""
        return Check("backend", spec.name, "fail", exc.message + shell, _env_fix(var))
    if spec.command is None or "${" in spec.command:
        return None
    found = catalog.resolve(spec.command, for_host=env.get("PATH", ""))
    if found.for_host:
        return None
    full = found.in_shell or "/full/path/to/" + spec.command
    fix = "emceepee servers add " + shlex.join([spec.name, "--replace", *config, "--", full, *spec.args])
    if found.in_shell:
        detail = (
            f"'{spec.command}' is only on this shell's PATH ({found.in_shell}), "
            f"not on a host's ({found.host_path})"
        )
    else:
        detail = f"'{spec.command}' is not found on a host's PATH ({found.host_path}) nor on this shell's"
    return Check("backend", spec.name, "fail", detail, fix)


def _env_fix(var: str) -> str:
    """Where to set `var` for emceepee under a host: the env block of its entry, in each host file
    that has one (where the host reads it), else in the host's config once installed."""
    from emceepee_cli.hosts import config_file

    files = []
    for host in catalog.HOSTS.values():
        with contextlib.suppress(ConfigError):
            doc = config_file.read(host.path())
            if doc.exists and (found := _entry(doc, host)) is not None:
                files.append(f"{host.path()} ({host.title}, entry '{found[0]}')")
    add = f'add "{var}": "…" to the "env" block of emceepee\'s entry in '
    if not files:
        return add + "your host's config (emceepee install HOST makes the entry)"
    return add + " and in ".join(files)


def _unset_var(message: str) -> str:
    start = message.find("${")
    return message[start + 2 : message.find("}", start)] if start >= 0 else "VAR"


async def backend_checks(
    loaded: Config,
    env: Mapping[str, str],
    wait_s: float,
    explicit: bool = False,
    logs: LogFolder | None = None,
) -> list[Check]:
    """A check per server: started as a host would, unless something stops it first (its stderr
    logged in `logs`). `explicit`: the config was named on the command line, so the fixes name it too."""
    from emceepee_cli.backends.backend import Status
    from emceepee_cli.calls import oneshot
    from emceepee_cli.redact import redact

    checks: dict[str, Check] = {}
    startable = []
    for spec in loaded.servers.values():
        if not spec.enabled:
            checks[spec.name] = Check(
                "backend", spec.name, "note", "disabled", f"emceepee servers enable {spec.name}"
            )
        elif (stopped := precheck(spec, env, ["--config", str(loaded.path)] if explicit else [])) is not None:
            checks[spec.name] = stopped
        else:
            startable.append(replace(spec))
    person = NobodyAsked()
    with environment(env):
        async with oneshot.started(startable, wait_s=wait_s, logs=logs, sign_in=person) as backends:
            for name, backend in backends.items():
                if backend.status == Status.READY:
                    detail = f"started as a host would: handshake ok, {len(backend.offer.tools)} tool(s)"
                    checks[name] = Check("backend", name, "ok", detail)
                    continue
                if name in person.asked:  # not a crash: its server wants a person, doctor has none
                    detail = "needs sign-in: its server asks you to sign in (doctor never does)"
                    checks[name] = Check("backend", name, "fail", detail, f"emceepee auth login {name}")
                    continue
                error = backend.last_error or f"still {backend.status} after {wait_s:g} s"
                detail = redact(error + _stderr(oneshot.heard(backend), error))
                fix = backend.refusal.hint if backend.refusal is not None else _try(backend.spec, env)
                checks[name] = Check("backend", name, "fail", detail, fix)
    return [checks[name] for name in loaded.servers if name in checks]


def _stderr(heard: list[str], error: str) -> str:
    """What the backend wrote to stderr, when its error does not quote it already (a death report
    ends with its stderr tail, backends/ending.py)."""
    tail = heard[-TAIL_LINES:]
    return "\nstderr:\n" + "\n".join(tail) if tail and "stderr tail:" not in error else ""


def _try(spec: ServerSpec, env: Mapping[str, str]) -> str:
    """How to see the failure for oneself: the backend started as a host starts it, not as this
    shell would (hosts/command_line.py)."""
    from emceepee_cli.hosts.command_line import reproduce

    if spec.url is not None:
        return f"check the URL and headers: emceepee servers show {spec.name}"
    started = reproduce(spec, env)
    reads = ", ".join(f"${{{name}}}" for name in started.reads)
    shell = f" ({reads} from this shell: set to what the host's env block holds)" if reads else ""
    return f"start it as a host does, to see what it says{shell}: {started.line}"


def failed(checks: list[Check]) -> bool:
    return any(c.state == "fail" for c in checks)


def error_check(area: str, name: str, exc: EmceepeeError) -> Check:
    return Check(area, name, "fail", exc.message, exc.hint)
