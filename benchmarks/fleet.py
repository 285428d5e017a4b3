"""The fleet against today's per-host `serve`, in one run: memory, the front's cost, a warm start.

    python benchmarks/fleet.py [--hosts N] [--backends N] [--calls N]

Two sides, each in a throwaway EMCEEPEE_HOME of its own (so nothing of yours is read or written, and
the two never meet one fleet), with the same config: N backends (`benchmarks/tiny_backend.py`,
standard library only, so what is measured is emceepee, not the backend), and `[fleet] idle_exit =
"0"` so the fleet leaves with its last host:

- in-process  `emceepee serve` with EMCEEPEE_FLEET=0: every host's serve runs every backend;
- fleet       `emceepee serve` with EMCEEPEE_FLEET=1: a front relaying to the per-user fleet
              (emceepee_cli/fleet/), which shares one backend between the hosts whose process
              would be the same (emceepee_cli/session/pool.py). Here every host has the same
              config, environment and working directory: each backend runs once.

Each host is this script speaking JSON-RPC lines itself over the pipes (blocking reads, no client
library: what is timed is emceepee). The hosts start one after another; each waits, through
`list_servers`, until every backend is ready. It measures:

1. the summed RSS of every emceepee process (serves; fronts and the fleet) and every backend, all
   hosts connected and idle (the PSS too: shared pages counted once);
2. the RSS of the process a host starts (serve; the front);
3. echo latency: `execute_tool` of the backend's `echo`, through the first host of each side and
   through a host on the fleet's socket itself (no front: the front's own cost, apart), calls
   interleaved (the order rotating), same machine, same run; what the fleet adds is the median of
   the differences between calls made one after the other, so the machine's load moves both alike;
4. a second host's first call to a backend the first host started: its first `execute_tool`,
   timed once its `initialize` and `list_servers` have been answered (in-process, that host's
   serve starts its own backends: the cold start the fleet saves).

This is not a test: it prints figures and one "ok"/"MISSED" line per goal (issue 22's goals), and
exits 0. Every wait is bounded; every process it started, and the fleet, is gone when it ends.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the emceepee of this tree, as the serves it starts (PYTHONPATH)

from emceepee_cli import __version__, rendezvous  # noqa: E402 - after the line above
from emceepee_cli.fleet import starter  # noqa: E402
from emceepee_cli.fleet.hello import Hello  # noqa: E402

TINY = Path(__file__).resolve().parent / "tiny_backend.py"

MB = 1024 * 1024
START_S = 120.0  # a host's serve answering and every backend ready, on a loaded machine
CALL_S = 30.0  # any one request
STOP_S = 30.0  # a host's serve (and the fleet) gone after its stdin closes
SETTLE_S = 2.0  # all hosts idle before memory is read: start-up garbage collected
READY_POLL_S = 0.1
WARMUP = 50
ECHO_TEXT = "0123456789abcdef"
SOCKET = "fleet socket"

GOALS = {
    "total RSS, fleet / in-process": 0.40,
    "front RSS (MB)": 25.0,
    "echo, fleet - in-process (ms)": 0.15,
    "second host's first call (ms)": 50.0,
}


# --------------------------------------------------------------------------- a host


class Host:
    """One MCP host speaking JSON-RPC lines, read blocking: on the pipes of a `serve` it started,
    or on a connection to the fleet's socket it made itself (no front: what the front adds)."""

    def __init__(
        self,
        name: str,
        fds: tuple[int, int],
        process: subprocess.Popen[bytes] | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        self.name = name
        self.stdin, self.stdout = fds  # what the host writes to, and reads from
        self.process, self.sock = process, sock
        self.buffer = b""
        self.next_id = 0

    @classmethod
    def spawn(cls, name: str, argv: list[str], env: dict[str, str], errlog: IO[bytes]) -> Host:
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=env, cwd=ROOT, bufsize=0
        )
        assert process.stdin is not None and process.stdout is not None
        return cls(name, (process.stdin.fileno(), process.stdout.fileno()), process=process)

    @classmethod
    def on_socket(cls, name: str, sock: socket.socket) -> Host:
        return cls(name, (sock.fileno(), sock.fileno()), sock=sock)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def send(self, message: dict[str, Any]) -> None:
        view = memoryview(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        while view:
            view = view[os.write(self.stdin, view) :]

    def line(self, deadline: float) -> bytes:
        """The next line serve writes; `TimeoutError` past `deadline`, `EOFError` when it ends."""
        while (end := self.buffer.find(b"\n")) < 0:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.stdout], [], [], left)[0]:
                raise TimeoutError(f"{self.name}: no answer within the bound")
            chunk = os.read(self.stdout, 1 << 16)
            if not chunk:
                raise EOFError(f"{self.name}: the other end closed")
            self.buffer += chunk
        line, self.buffer = self.buffer[:end], self.buffer[end + 1 :]
        return line

    def request(self, method: str, params: dict[str, Any], bound_s: float = CALL_S) -> dict[str, Any]:
        """The answer to one request (notifications and requests serve sends meanwhile are skipped)."""
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        deadline = time.monotonic() + bound_s
        while True:
            message = json.loads(self.line(deadline))
            if message.get("id") == self.next_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{self.name}: {method} failed: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def initialize(self) -> None:
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": f"bench-{self.name}", "version": "0"},
        }
        self.request("initialize", params, START_S)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def servers(self) -> list[dict[str, Any]]:
        listed: list[dict[str, Any]] = self.tool("list_servers", {})["structuredContent"]["servers"]
        return listed

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def echo(self, server: str = "b0") -> bool:
        """One echo call through execute_tool; whether it came back right (at once, not as a task)."""
        wrapped = {"server": server, "tool": "echo", "args": {"text": ECHO_TEXT}, "timeout_ms": 30_000}
        result = self.tool("execute_tool", wrapped)
        return not result.get("isError") and result["content"][0].get("text") == ECHO_TEXT

    def all_ready(self, count: int) -> None:
        """Wait (at most `START_S`) until list_servers shows `count` servers, all ready."""
        deadline = time.monotonic() + START_S
        while True:
            servers = self.servers()
            if len(servers) == count and all(s["status"] == "ready" for s in servers):
                return
            if time.monotonic() > deadline:
                statuses = sorted({s["status"] for s in servers})
                raise TimeoutError(f"{self.name}: backends not all ready after {START_S:g} s: {statuses}")
            time.sleep(READY_POLL_S)  # polling list_servers is what a host can do

    def close(self) -> None:
        """Close serve's stdin (the host leaves) and wait for it, bounded; kill it past the bound.
        On a socket: shut its write side, and wait (bounded) for the fleet to close it."""
        if self.sock is not None:
            with contextlib.suppress(OSError, TimeoutError, EOFError):
                self.sock.shutdown(socket.SHUT_WR)
                deadline = time.monotonic() + STOP_S
                while True:
                    self.line(deadline)
            self.sock.close()
            return
        assert self.process is not None
        with contextlib.suppress(OSError):
            os.close(self.stdin)
        try:
            self.process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(STOP_S)
        with contextlib.suppress(OSError):
            os.close(self.stdout)


# --------------------------------------------------------------------------- a side


@dataclass
class Side:
    """One way of serving: a home, a config, its hosts and what they measured."""

    name: str
    fleet: str  # EMCEEPEE_FLEET
    home: Path
    backends: int
    hosts: list[Host] = field(default_factory=list)
    first_call_ms: list[float] = field(default_factory=list)  # hosts 2.., their first call to b0
    connect_ms: list[float] = field(default_factory=list)  # spawn -> initialize + list_servers answered
    spawn_to_call_ms: list[float] = field(default_factory=list)  # hosts 2.., spawn -> that call answered
    seen: set[int] = field(default_factory=set)  # every pid of this side measured, to stop at the end
    socket_hosts: list[Host] = field(default_factory=list)  # on the fleet's socket, no front

    @property
    def config(self) -> Path:
        return self.home / "config.toml"

    def write_config(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        lines = ["[fleet]", 'idle_exit = "0"']
        for i in range(self.backends):
            lines += [
                f"[servers.b{i}]",
                f"command = {json.dumps(sys.executable)}",
                f"args = [{json.dumps(str(TINY))}]",
            ]
        self.config.write_text("\n".join(lines) + "\n")

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("EMCEEPEE_CONFIG", "EMCEEPEE_DB")}
        env |= {"EMCEEPEE_HOME": str(self.home), "EMCEEPEE_FLEET": self.fleet}
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
        return env

    def add_host(self, errlog: IO[bytes]) -> Host:
        """Start one more host; from the second on, time its first call to a backend already warm."""
        argv = [sys.executable, "-m", "emceepee_cli", "serve", "--config", str(self.config)]
        started = time.perf_counter()
        host = Host.spawn(f"{self.name} host {len(self.hosts) + 1}", argv, self.env(), errlog)
        self.hosts.append(host)
        host.initialize()
        host.servers()
        self.connect_ms.append((time.perf_counter() - started) * 1000)
        if len(self.hosts) > 1:
            called = time.perf_counter()
            ok = host.echo("b0")
            self.first_call_ms.append((time.perf_counter() - called) * 1000)
            self.spawn_to_call_ms.append((time.perf_counter() - started) * 1000)
            if not ok:
                print(f"   !! {host.name}: its first echo came back wrong", flush=True)
        host.all_ready(self.backends)
        return host

    def socket_host(self) -> Host:
        """A host connected to the fleet's socket itself, as a front connects (its hello, with this
        side's environment and working directory: it shares the fronts' backends), no front between."""
        found = rendezvous.places(self.home / "run")
        if not found:
            raise RuntimeError(f"{self.name}: no fleet socket in {self.home / 'run'}")
        hello = Hello(
            version=__version__,
            front_pid=os.getpid(),
            cwd=str(ROOT),
            env=self.env(),
            config=str(self.config),
            db=str(self.home / "data" / "journal.db"),
        )
        connection = starter.attempt(found[0], hello)
        if connection is None:
            raise RuntimeError(f"{self.name}: the fleet did not welcome a host on {found[0].sock}")
        host = Host.on_socket(f"{self.name} socket", connection.sock)
        self.socket_hosts.append(host)
        host.initialize()
        host.all_ready(self.backends)
        return host

    def processes(self) -> tuple[list[psutil.Process], list[psutil.Process]]:
        """(emceepee's processes, the backends): every process running with this side's config
        (serves, fronts, the fleet), and everything below them."""
        mine = [p for p in psutil.process_iter(["cmdline"]) if str(self.config) in (p.info["cmdline"] or [])]
        below = {c.pid: c for p in mine for c in _children(p)}
        ours = {p.pid for p in mine}
        backends = [c for pid, c in below.items() if pid not in ours]
        self.seen |= ours | set(below)
        return mine, backends

    def fleet_pids(self) -> list[int]:
        """The fleet's pid (none in-process): the process running `fleet run` with this config."""
        mine, _ = self.processes()
        return [p.pid for p in mine if "fleet" in (p.info["cmdline"] or [])]

    def stop(self) -> None:
        """Every host leaves; then nothing of this side may still run (killed past the bounds)."""
        self.processes()  # what runs now, to look for once the hosts have gone
        for host in [*self.socket_hosts, *self.hosts]:
            host.close()
        deadline = time.monotonic() + STOP_S
        left = [pid for pid in self.seen if psutil.pid_exists(pid)]
        while left and time.monotonic() < deadline:
            time.sleep(0.05)  # the fleet leaves with its last host (idle_exit 0), bounded above
            left = [pid for pid in left if _running(pid)]
        for pid in left:
            print(f"   !! {self.name}: pid {pid} outlived its hosts; killed", flush=True)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _children(process: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return process.children(recursive=True)
    return []


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# --------------------------------------------------------------------------- measurements


@dataclass
class Memory:
    """One side's memory, all hosts connected and idle (MB)."""

    emceepee_rss: float
    backends_rss: float
    emceepee_pss: float
    backends_pss: float
    host_process_rss: list[float]  # the processes the hosts started: serves, or fronts
    fleet_rss: float  # the fleet itself (0 in-process)
    emceepee_count: int
    backend_count: int

    @property
    def total_rss(self) -> float:
        return self.emceepee_rss + self.backends_rss

    @property
    def total_pss(self) -> float:
        return self.emceepee_pss + self.backends_pss


def memory(side: Side) -> Memory:
    mine, backends = side.processes()
    rss = {p.pid: _mb(p, "rss") for p in [*mine, *backends]}
    pss = {p.pid: _mb(p, "pss") for p in [*mine, *backends]}
    host_pids = {h.pid for h in side.hosts}
    fleet = side.fleet_pids()
    return Memory(
        emceepee_rss=sum(rss[p.pid] for p in mine),
        backends_rss=sum(rss[p.pid] for p in backends),
        emceepee_pss=sum(pss[p.pid] for p in mine),
        backends_pss=sum(pss[p.pid] for p in backends),
        host_process_rss=[rss.get(pid, math.nan) for pid in sorted(host_pids)],
        fleet_rss=sum(rss.get(pid, 0.0) for pid in fleet),
        emceepee_count=len(mine),
        backend_count=len(backends),
    )


def _mb(process: psutil.Process, kind: str) -> float:
    try:
        info = process.memory_full_info() if kind == "pss" else process.memory_info()
    except psutil.Error:
        return 0.0
    return float(getattr(info, kind, math.nan)) / MB


def echo_latency(hosts: dict[str, Host], calls: int) -> dict[str, list[float]]:
    """`calls` echoes through each host, interleaved (the order rotating): seconds each."""
    out: dict[str, list[float]] = {name: [] for name in hosts}
    every = list(hosts.items())
    errors = 0
    for i in range(WARMUP + calls):
        for name, host in every[i % len(every) :] + every[: i % len(every)]:
            started = time.perf_counter()
            ok = host.echo()
            seconds = time.perf_counter() - started
            errors += not ok
            if i >= WARMUP:
                out[name].append(seconds)
    if errors:
        print(f"   !! {errors} echo call(s) came back wrong", flush=True)
    return out


# --------------------------------------------------------------------------- report


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def paired(these: list[float], those: list[float]) -> float:
    """The median of the differences between calls made one after the other (ms)."""
    return statistics.median((a - b) * 1000 for a, b in zip(these, those, strict=True))


def row(label: str, *cells: str) -> None:
    print("   " + f"{label:40}" + "".join(f"{c:>14}" for c in cells))


def report(
    sides: list[Side], mem: dict[str, Memory], echo: dict[str, list[float]]
) -> list[tuple[str, str, bool]]:
    inproc, fleet = sides
    names = [s.name for s in sides]
    hosts, backends = len(inproc.hosts), inproc.backends
    load = os.getloadavg()[0]
    print(
        f"emceepee fleet  (python {platform.python_version()}, {platform.system()} {platform.machine()}, "
        f"{os.cpu_count()} cpus, load {load:.1f})"
    )
    print("-" * 82)
    print(
        f"1. {hosts} hosts x {backends} idle backends: memory (MB), every backend ready, idle {SETTLE_S:g} s"
    )
    row("", *names)
    row(
        "processes: emceepee + backends",
        *[f"{mem[n].emceepee_count} + {mem[n].backend_count}" for n in names],
    )
    row("RSS emceepee", *[f"{mem[n].emceepee_rss:.1f}" for n in names])
    row("RSS backends", *[f"{mem[n].backends_rss:.1f}" for n in names])
    row("RSS total", *[f"{mem[n].total_rss:.1f}" for n in names])
    row("PSS total (shared pages once)", *[f"{mem[n].total_pss:.1f}" for n in names])
    row("RSS of the fleet itself", "", f"{mem[fleet.name].fleet_rss:.1f}")
    ratio = mem[fleet.name].total_rss / mem[inproc.name].total_rss
    pss_ratio = mem[fleet.name].total_pss / mem[inproc.name].total_pss
    row("fleet / in-process (RSS; PSS)", "", f"{ratio:.3f}; {pss_ratio:.3f}")
    print("-" * 82)
    print("2. the process a host starts: RSS (MB) of each")
    for name in names:
        row(name, *[f"{x:.1f}" for x in mem[name].host_process_rss])
    front = max(mem[fleet.name].host_process_rss)
    print("-" * 82)
    calls = len(echo[inproc.name])
    print(f"3. echo of {len(ECHO_TEXT)} bytes through execute_tool, {calls} calls each, interleaved (ms)")
    print(f"   ({SOCKET}: a host on the fleet's socket itself, no front: what the front adds, apart)")
    row("", *names, SOCKET)
    for label, q in (("median", 50.0), ("p95", 95.0)):
        row(label, *[f"{pct(echo[n], q) * 1000:.3f}" for n in [*names, SOCKET]])
    # Each call beside the calls of the other sides made next to it: the machine's load moves them alike.
    added = paired(echo[fleet.name], echo[inproc.name])
    row("added: fleet - in-process", "", f"{added:+.3f}")
    row("  of which the front: fleet - socket", "", f"{paired(echo[fleet.name], echo[SOCKET]):+.3f}")
    row("  the session: socket - in-process", "", f"{paired(echo[SOCKET], echo[inproc.name]):+.3f}")
    print("   (added: the median of the differences between the calls made one after the other)")
    print("-" * 82)
    print("4. a host's start (ms): spawn to initialize + list_servers answered; then its first call to b0")
    row("", *names)
    for i in range(hosts):
        row(f"host {i + 1}: initialize + list_servers", *[f"{s.connect_ms[i]:.1f}" for s in sides])
        if i:
            row(f"host {i + 1}: then its first call to b0", *[f"{s.first_call_ms[i - 1]:.1f}" for s in sides])
            row(
                f"host {i + 1}: spawn to that call answered",
                *[f"{s.spawn_to_call_ms[i - 1]:.1f}" for s in sides],
            )
    second = fleet.first_call_ms[0]
    print("-" * 82)
    return [
        ("total RSS, fleet / in-process", f"{ratio:.3f}", ratio <= GOALS["total RSS, fleet / in-process"]),
        ("front RSS (MB)", f"{front:.1f}", front <= GOALS["front RSS (MB)"]),
        ("echo, fleet - in-process (ms)", f"{added:+.3f}", added <= GOALS["echo, fleet - in-process (ms)"]),
        ("second host's first call (ms)", f"{second:.1f}", second <= GOALS["second host's first call (ms)"]),
    ]


# --------------------------------------------------------------------------- main


@contextlib.contextmanager
def sides_stopped(sides: list[Side]) -> Iterator[None]:
    """Whatever happens, every host leaves and nothing of either side is left running."""
    try:
        yield
    finally:
        for side in sides:
            side.stop()


def measure(args: argparse.Namespace, tmp: Path, errlog: IO[bytes]) -> None:
    sides = [
        Side("in-process", "0", tmp / "in-process", args.backends),
        Side("fleet", "1", tmp / "fleet", args.backends),
    ]
    with sides_stopped(sides):
        for side in sides:
            side.write_config()
            for i in range(args.hosts):
                print(f"  … {side.name}: host {i + 1}", file=sys.stderr, flush=True)
                side.add_host(errlog)
        time.sleep(SETTLE_S)  # idle: the figure is memory at rest, not mid-start
        mem = {side.name: memory(side) for side in sides}
        print(f"  … echo, {args.calls} calls per side", file=sys.stderr, flush=True)
        hosts = {side.name: side.hosts[0] for side in sides}
        hosts[SOCKET] = sides[1].socket_host()
        echo = echo_latency(hosts, args.calls)
        fleet_pids = sides[1].fleet_pids()
    goals = report(sides, mem, echo)
    gone = not any(_running(pid) for pid in fleet_pids)
    goals.append(("the fleet left with its last host", "yes" if gone else "no", gone))
    print("goals (issue 22; fleet against in-process, this run)")
    for name, value, met in goals:
        target = GOALS.get(name)
        print(
            f"   {'ok    ' if met else 'MISSED'} {name:36} {value:>10}"
            + (f"   goal <= {target:g}" if target else "")
        )


def _leave(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=3, help="host sessions per side (default 3)")
    parser.add_argument("--backends", type=int, default=20, help="idle backends in the config (default 20)")
    parser.add_argument("--calls", type=int, default=1000, help="echo calls per side (default 1000)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _leave)  # a kill still stops every process it started
    args.hosts, args.backends, args.calls = max(2, args.hosts), max(1, args.backends), max(1, args.calls)
    with tempfile.TemporaryDirectory(prefix="emceepee-fleet-") as tmp:
        log = Path(tmp) / "stderr.log"
        with log.open("wb") as errlog:
            try:
                measure(args, Path(tmp), errlog)
            except BaseException:
                for path in (log, Path(tmp) / "fleet" / "data" / "logs" / "fleet.log"):
                    if path.exists():
                        tail = path.read_text(errors="replace").splitlines()[-30:]
                        print(f"--- last lines of {path.name}:", *tail, sep="\n", file=sys.stderr)
                raise


if __name__ == "__main__":
    main()
