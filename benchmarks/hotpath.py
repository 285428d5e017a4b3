"""The hot path's cost, side by side: direct, a plain SDK proxy, and emceepee, in one run.

    python benchmarks/hotpath.py [--calls N] [--no-scale] [--big]

Every side is a real process driven by the SDK's `Client` over stdio (handshake era), all in
front of the same minimal backend (`benchmarks/tiny_backend.py`, standard library only, so what
is measured is the proxy, not the backend):

- direct    the client talks to the backend itself;
- proxy     a plain proxy on the SDK (`--proxy`, a few dozen lines below): a low-level `Server`
            with one `execute_tool` tool that forwards to a `ClientSession` per backend;
- emceepee  `emceepee serve` (a throwaway EMCEEPEE_HOME, so nothing of yours is read or written);
- slow lane the same with EMCEEPEE_FAST_LANE=0: every call through the SDK models.

Calls are interleaved across the sides, so machine load hits them alike; ratios to direct in
one run are what to read. Each figure is printed with how it grows with the work (calls,
concurrency, payload, backends), so a super-linear cost shows as a growing per-unit column.
This is not a test: it prints figures and one "ok"/"MISSED" line per goal, and exits 0.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.abc
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]
TINY = Path(__file__).resolve().parent / "tiny_backend.py"
SDK_BACKEND = Path(__file__).resolve().parent / "sdk_backend.py"

MB = 1024 * 1024
CALL_S = 120.0  # one call, or one round of concurrent calls (a 40 MB result through a slow side)
START_S = 120.0  # a side connected and its backends ready
WARMUP = 30
ECHO_TEXT = "0123456789abcdef"  # 16 bytes
SLOW_S = 0.05
CONCURRENCY = (10, 50, 200)
ROUNDS = 5
PAYLOADS_MB = (1, 5, 20)
BIG_PAYLOADS_MB = (40,)
IDLE_BACKENDS = 20
MANY_BACKENDS = 100

GOALS = {
    "echo ratio": 1.3,
    "echo added ms": 0.5,
    "50 concurrent ratio": 1.15,
    "1 MB ratio": 1.5,
    "20 MB ratio": 2.0,
    "own RSS MB, 20 idle backends": 60.0,
    "RSS MB per idle backend": 0.5,
}

Call = Callable[[str, dict[str, Any]], Awaitable[Any]]


# --------------------------------------------------------------------------- the plain SDK proxy


async def run_proxy(count: int, backend: str) -> None:
    """A plain SDK proxy over `count` tiny backends: what a ~50-line multiplexer on the SDK costs."""
    import mcp_types as types
    from mcp import ClientSession, stdio_server
    from mcp.server import Server, ServerRequestContext

    sessions: dict[str, ClientSession] = {}
    tool = types.Tool(
        name="execute_tool",
        input_schema={
            "type": "object",
            "properties": {"server": {"type": "string"}, "tool": {"type": "string"}, "args": {}},
        },
    )

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: ServerRequestContext[Any], params: Any) -> types.CallToolResult:
        args = params.arguments or {}
        return await sessions[args["server"]].call_tool(args["tool"], args.get("args") or {})

    async with AsyncExitStack() as stack:
        for i in range(count):
            params = StdioServerParameters(command=sys.executable, args=[backend])
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions[f"b{i}"] = session
        server: Server[Any] = Server("proxy", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


# --------------------------------------------------------------------------- sides


@dataclass
class Side:
    name: str
    client: Client
    marker: str  # a string only this side's process has in its command line
    via_proxy: bool
    times: dict[str, list[float]] = field(default_factory=dict)

    async def call(self, tool: str, args: dict[str, Any], server: str = "b0") -> Any:
        if not self.via_proxy:
            return await self.client.call_tool(tool, args)
        wrapped: dict[str, Any] = {"server": server, "tool": tool, "args": args}
        if self.name.startswith("emceepee") or self.name == "slow lane":
            wrapped["timeout_ms"] = 50_000
        return await self.client.call_tool("execute_tool", wrapped)


def tables(count: int, backend: Path) -> str:
    lines = []
    for i in range(count):
        lines += [
            f"[servers.b{i}]",
            f"command = {json.dumps(sys.executable)}",
            f"args = [{json.dumps(str(backend))}]",
        ]
    return "\n".join(lines) + "\n"


def client_for(argv: list[str], errlog: TextIO, env: dict[str, str] | None = None) -> Client:
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=ROOT)
    return Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None)


def emceepee_argv(
    home: Path, backends: int, tag: str, backend: Path = TINY
) -> tuple[list[str], dict[str, str]]:
    home.mkdir(parents=True, exist_ok=True)
    config = home / f"config-{tag}.toml"
    config.write_text(tables(backends, backend))
    env = {k: v for k, v in os.environ.items() if k not in ("EMCEEPEE_CONFIG", "EMCEEPEE_DB")}
    env["EMCEEPEE_HOME"] = str(home)
    env["EMCEEPEE_FLEET"] = "0"  # serve in-process: benchmarks/fleet.py weighs the fleet against it
    return [sys.executable, "-m", "emceepee_cli", "serve", "--config", str(config)], env


def proxy_argv(backends: int, tag: str, backend: Path = TINY) -> list[str]:
    here = str(Path(__file__).resolve())
    return [sys.executable, here, "--proxy", str(backends), "--backend", str(backend), "--tag", tag]


def pid_of(marker: str) -> int | None:
    """The pid of our child process whose command line holds `marker`."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == me and marker in cmdline:
            return int(entry.name)
    return None


def rss_mb(pid: int | None) -> float:
    if pid is None:
        return math.nan
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return math.nan


async def all_ready(client: Client, count: int) -> None:
    """emceepee's backends all ready (list_servers polled; bounded by the caller)."""
    while True:
        servers = (await client.call_tool("list_servers", {})).structured_content["servers"]
        if sum(s["status"] == "ready" for s in servers) == count:
            return
        await anyio.sleep(0.1)


# --------------------------------------------------------------------------- measurements


def ok_result(result: Any) -> bool:
    return not result.is_error and not (result.structured_content or {}).get("proxy_task")


async def timed(call: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    with anyio.fail_after(CALL_S):
        start = time.perf_counter()
        result = await call()
        return time.perf_counter() - start, result


async def echo_latency(sides: list[Side], calls: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {s.name: [] for s in sides}
    errors = 0
    for i in range(WARMUP + calls):
        order = sides[i % len(sides) :] + sides[: i % len(sides)]
        for side in order:
            seconds, result = await timed(lambda side=side: side.call("echo", {"text": ECHO_TEXT}))
            errors += not ok_result(result) or result.content[0].text != ECHO_TEXT
            if i >= WARMUP:
                out[side.name].append(seconds)
    if errors:
        print(f"   !! {errors} echo call(s) came back wrong", flush=True)
    return out


async def concurrent(side: Side, n: int) -> tuple[float, int]:
    bad = 0

    async def one() -> None:
        nonlocal bad
        try:
            result = await side.call("slow", {"seconds": SLOW_S})
            bad += not ok_result(result)
        except Exception:  # noqa: BLE001 - counted: the figure is "without errors"
            bad += 1

    with anyio.fail_after(CALL_S):
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
        return time.perf_counter() - start, bad


async def concurrency(sides: list[Side]) -> dict[int, dict[str, tuple[float, int]]]:
    out: dict[int, dict[str, tuple[float, int]]] = {}
    for n in CONCURRENCY:
        walls: dict[str, list[float]] = {s.name: [] for s in sides}
        bad: dict[str, int] = {s.name: 0 for s in sides}
        for r in range(ROUNDS):
            for side in sides[r % len(sides) :] + sides[: r % len(sides)]:
                wall, errors = await concurrent(side, n)
                walls[side.name].append(wall)
                bad[side.name] += errors
        out[n] = {name: (statistics.median(w), bad[name]) for name, w in walls.items()}
    return out


@dataclass
class Scale:
    backends: int
    rss: dict[str, float]
    connect_ms: dict[str, float]  # process start -> initialize answered
    list_ms: dict[str, float]  # initialize answered -> tools/list answered
    first_call_ms: dict[str, float]  # connect -> first call to the last backend answered
    start_alone_ms: float  # one backend started and called directly: the bound for the above


async def scale(home: Path, count: int, errlog: TextIO) -> Scale:
    """emceepee and the plain proxy with `count` backends: start-up, listing, first call, RSS."""
    rss: dict[str, float] = {}
    list_ms: dict[str, float] = {}
    connect_ms: dict[str, float] = {}
    first_ms: dict[str, float] = {}
    last = f"b{count - 1}"
    started = time.perf_counter()
    async with client_for([sys.executable, str(TINY)], errlog) as direct:
        await direct.call_tool("echo", {"text": "x"})
    alone = (time.perf_counter() - started) * 1000
    argv, env = emceepee_argv(home / f"scale{count}", count, f"scale{count}")
    with anyio.fail_after(START_S):
        started = time.perf_counter()
        async with client_for(argv, errlog, env) as mux:
            connect_ms["emceepee"] = (time.perf_counter() - started) * 1000
            await mux.list_tools()
            list_ms["emceepee"] = (time.perf_counter() - started) * 1000 - connect_ms["emceepee"]
            await mux.call_tool("execute_tool", {"server": last, "tool": "echo", "args": {"text": "x"}})
            first_ms["emceepee"] = (time.perf_counter() - started) * 1000
            await all_ready(mux, count)
            await anyio.sleep(1.0)  # idle: let start-up garbage settle
            rss["emceepee"] = rss_mb(pid_of(f"config-scale{count}.toml"))
    with anyio.fail_after(START_S):
        started = time.perf_counter()
        async with client_for(proxy_argv(count, f"scale{count}"), errlog) as proxy:
            connect_ms["proxy"] = (time.perf_counter() - started) * 1000
            await proxy.list_tools()
            list_ms["proxy"] = (time.perf_counter() - started) * 1000 - connect_ms["proxy"]
            await proxy.call_tool("execute_tool", {"server": last, "tool": "echo", "args": {"text": "x"}})
            first_ms["proxy"] = (time.perf_counter() - started) * 1000
            await anyio.sleep(1.0)
            rss["proxy"] = rss_mb(pid_of(f"--tag scale{count}"))
    return Scale(count, rss, connect_ms, list_ms, first_ms, alone)


# --------------------------------------------------------------------------- report


def ms(seconds: float) -> str:
    return f"{seconds * 1000:9.2f}"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def header(title: str, names: list[str]) -> None:
    print("-" * 92)
    print(title)
    print("   " + f"{'':28}" + "".join(f"{n:>14}" for n in names))


def row(label: str, cells: list[str]) -> None:
    print("   " + f"{label:28}" + "".join(f"{c:>14}" for c in cells))


def report(
    names: list[str],
    echo: dict[str, list[float]],
    conc: dict[int, dict[str, tuple[float, int]]],
    pay: dict[int, dict[str, float]],
    scales: list[Scale],
) -> list[tuple[str, str, bool]]:
    goals: list[tuple[str, str, bool]] = []
    d50 = statistics.median(echo["direct"])
    header(f"1. echo of {len(ECHO_TEXT)} bytes, {len(echo['direct'])} sequential calls per side", names)
    row("median (ms)", [ms(statistics.median(echo[n])) for n in names])
    row("p95 (ms)", [ms(pct(echo[n], 95)) for n in names])
    row("added per call (ms)", [ms(statistics.median(echo[n]) - d50) for n in names])
    row("ratio to direct", [f"x{statistics.median(echo[n]) / d50:.2f}" for n in names])
    m50 = statistics.median(echo["emceepee"])
    goals.append(("echo ratio", f"x{m50 / d50:.2f}", m50 / d50 <= GOALS["echo ratio"]))
    added = (m50 - d50) * 1000
    goals.append(("echo added ms", f"{added:.2f}", added <= GOALS["echo added ms"]))

    header(
        f"2. N concurrent slow({SLOW_S} s) calls, median wall of {ROUNDS} rounds "
        f"(ideal {SLOW_S * 1000:.0f} ms)",
        names,
    )
    for n, by in conc.items():
        direct = by["direct"][0]
        row(f"N={n} wall ms (ratio)", [f"{by[x][0] * 1000:.0f} (x{by[x][0] / direct:.2f})" for x in names])
        row(f"N={n} ms per call over ideal", [f"{(by[x][0] - SLOW_S) * 1000 / n:.3f}" for x in names])
        errors = [f"{by[x][1]} err" for x in names]
        if any(by[x][1] for x in names):
            row(f"N={n} errors/promotions", errors)
    if 50 in conc:
        ratio = conc[50]["emceepee"][0] / conc[50]["direct"][0]
        goals.append(("50 concurrent ratio", f"x{ratio:.2f}", ratio <= GOALS["50 concurrent ratio"]))
    if 200 in conc:
        bad = conc[200]["emceepee"][1]
        goals.append(("200 concurrent, errors", str(bad), bad == 0))

    header("3. one result of S MB (a text block), median (ms; per MB; ratio to direct)", names)
    for size, by in pay.items():
        row(f"{size} MB", [f"{by[x] * 1000:.0f} (x{by[x] / by['direct']:.2f})" for x in names])
        row(f"{size} MB, ms per MB", [f"{by[x] * 1000 / size:.1f}" for x in names])
    for size in (1, 20):
        if size in pay:
            ratio = pay[size]["emceepee"] / pay[size]["direct"]
            goals.append((f"{size} MB ratio", f"x{ratio:.2f}", ratio <= GOALS[f"{size} MB ratio"]))

    if scales:
        print("-" * 92)
        print(
            "4. backends: own RSS when idle, tools/list and the first call to the last backend after connect"
        )
        print("   " + f"{'':28}" + "".join(f"{f'{s.backends} backends':>28}" for s in scales))
        print("   " + f"{'':28}" + "".join(f"{'emceepee':>14}{'proxy':>14}" for _ in scales))
        rows = (
            ("own RSS (MB)", "rss"),
            ("connected after (ms)", "connect_ms"),
            ("then tools/list (ms)", "list_ms"),
        )
        for label, key in rows:
            cells = [f"{getattr(s, key)[x]:14.1f}" for s in scales for x in ("emceepee", "proxy")]
            print("   " + f"{label:28}" + "".join(cells))
        cells = [f"{s.first_call_ms[x]:14.0f}" for s in scales for x in ("emceepee", "proxy")]
        print("   " + f"{'first call, last one (ms)':28}" + "".join(cells))
        cells = [f"{s.start_alone_ms:28.0f}" for s in scales]
        print("   " + f"{'one backend alone (ms)':28}" + "".join(cells))
        small = next((s for s in scales if s.backends == IDLE_BACKENDS), None)
        big = next((s for s in scales if s.backends == MANY_BACKENDS), None)
        if small:
            own = small.rss["emceepee"]
            goals.append(
                ("own RSS MB, 20 idle backends", f"{own:.1f}", own <= GOALS["own RSS MB, 20 idle backends"])
            )
        if small and big:
            per = (big.rss["emceepee"] - small.rss["emceepee"]) / (big.backends - small.backends)
            goals.append(("RSS MB per idle backend", f"{per:.2f}", per <= GOALS["RSS MB per idle backend"]))
            print(f"   emceepee RSS growth per idle backend: {per:.2f} MB")
        if big:
            listed = big.list_ms["emceepee"]
            goals.append(("tools/list, 100 backends (ms)", f"{listed:.1f}", listed <= 50))
    print("-" * 92)
    return goals


class RawClient:
    """A host that speaks JSON-RPC lines itself: for big results, where the SDK client's own line
    reading (it re-joins its buffer for every chunk) would dominate every side's figure."""

    def __init__(self, name: str, process: anyio.abc.Process) -> None:
        self.name = name
        self.process = process
        self.buffer = bytearray()
        self.next_id = 0

    @classmethod
    async def start(cls, name: str, argv: list[str], env: dict[str, str] | None, errlog: TextIO) -> RawClient:
        process = await anyio.open_process(argv, env=env, cwd=ROOT, stderr=errlog)
        client = cls(name, process)
        init = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "b", "version": "0"},
        }
        await client.request("initialize", init)
        await client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return client

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        await self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.process.stdout is not None
        scanned = 0
        while True:
            end = self.buffer.find(b"\n", scanned)
            if end < 0:
                scanned = len(self.buffer)
                self.buffer += await self.process.stdout.receive(4 * MB)
                continue
            line = bytes(self.buffer[:end])
            del self.buffer[: end + 1]
            scanned = 0
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return message

    async def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        if self.name == "direct":
            return await self.request("tools/call", {"name": tool, "arguments": args})
        wrapped = {"server": "b0", "tool": tool, "args": args, "timeout_ms": 50_000}
        return await self.request("tools/call", {"name": "execute_tool", "arguments": wrapped})

    async def close(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        with anyio.move_on_after(10):
            await self.process.wait()
        if self.process.returncode is None:
            self.process.kill()


async def ready(raw: RawClient) -> None:
    """emceepee's backend b0 answers (list_servers polled; bounded by the caller)."""
    while True:
        reply = await raw.request("tools/call", {"name": "list_servers", "arguments": {}})
        servers = reply["result"].get("structuredContent", {}).get("servers", [])
        if all(s["status"] == "ready" for s in servers) and servers:
            return
        await anyio.sleep(0.1)


async def payloads(raws: list[RawClient], sizes: tuple[int, ...]) -> dict[int, dict[str, float]]:
    out: dict[int, dict[str, float]] = {}
    for size in sizes:
        reps = 5 if size <= 5 else 2
        runs: dict[str, list[float]] = {r.name: [] for r in raws}
        for rep in range(reps):
            for raw in raws[rep % len(raws) :] + raws[: rep % len(raws)]:
                seconds, reply = await timed(lambda raw=raw, size=size: raw.call("blob", {"size": size * MB}))
                content = (reply.get("result") or {}).get("content") or [{}]
                if len(content[0].get("text", "")) != size * MB:
                    print(
                        f"   !! {raw.name}: the {size} MB result came back wrong: {str(reply)[:300]}",
                        flush=True,
                    )
                runs[raw.name].append(seconds)
        out[size] = {name: statistics.median(r) for name, r in runs.items()}
    return out


def hot_sides(home: Path, backend: Path, tag: str) -> dict[str, tuple[list[str], dict[str, str] | None]]:
    """The four sides' commands (and environments), each in front of `backend`."""
    argv, env = emceepee_argv(home / f"{tag}-fast", 2, f"{tag}fast", backend)
    slow_argv, slow_env = emceepee_argv(home / f"{tag}-slow", 2, f"{tag}slow", backend)
    return {
        "direct": ([sys.executable, str(backend)], None),
        "proxy": (proxy_argv(2, tag, backend), None),
        "emceepee": (argv, env),
        "slow lane": (slow_argv, {**slow_env, "EMCEEPEE_FAST_LANE": "0"}),
    }


async def measure(args: argparse.Namespace, home: Path, errlog: TextIO) -> None:
    names = ["direct", "proxy", "emceepee", "slow lane"]
    async with AsyncExitStack() as stack:
        sides = [
            Side(name, await stack.enter_async_context(client_for(argv, errlog, env)), name, name != "direct")
            for name, (argv, env) in hot_sides(home, SDK_BACKEND, "hot").items()
        ]
        with anyio.fail_after(START_S):
            for side in sides:
                if side.name in ("emceepee", "slow lane"):
                    await all_ready(side.client, 2)
                    await side.client.call_tool("list_tools", {})
        print("  … echo latency", file=sys.stderr, flush=True)
        echo = await echo_latency(sides, args.calls)
        print("  … concurrency", file=sys.stderr, flush=True)
        conc = await concurrency(sides)
    print("  … payloads", file=sys.stderr, flush=True)
    raws = []
    try:
        for name, (argv, env) in hot_sides(home, TINY, "pay").items():
            raws.append(await RawClient.start(name, argv, env, errlog))
        with anyio.fail_after(START_S):
            for raw in raws:
                if raw.name in ("emceepee", "slow lane"):
                    await ready(raw)
        pay = await payloads(raws, PAYLOADS_MB + (BIG_PAYLOADS_MB if args.big else ()))
    finally:
        for raw in raws:
            await raw.close()
    scales = []
    if args.scale:
        for count in (IDLE_BACKENDS, MANY_BACKENDS):
            print(f"  … {count} backends", file=sys.stderr, flush=True)
            scales.append(await scale(home, count, errlog))
    system = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}"
    print(f"emceepee hot path  (python {platform.python_version()}, mcp {version('mcp')}, {system})")
    print("   echo and concurrency: SDK clients, SDK backend; payloads: raw JSON-RPC client, stdlib backend")
    goals = report(names, echo, conc, pay, scales)
    print("goals (emceepee, ratios to direct in this run)")
    for name, value, met in goals:
        target = GOALS.get(name)
        print(
            f"   {'ok    ' if met else 'MISSED'} {name:34} {value:>10}"
            + (f"   goal <= {target:g}" if target else "")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="sequential echo calls per side (default 300)")
    parser.add_argument(
        "--no-scale", dest="scale", action="store_false", help="skip the 20/100-backend figures"
    )
    parser.add_argument("--big", action="store_true", help="also a 40 MB result")
    parser.add_argument("--proxy", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--tag", help=argparse.SUPPRESS)
    parser.add_argument("--backend", default=str(TINY), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.proxy is not None:
        anyio.run(run_proxy, args.proxy, args.backend)
        return
    args.calls = max(1, args.calls)
    with tempfile.TemporaryDirectory(prefix="emceepee-hotpath-") as tmp:
        home = Path(tmp)
        with open(home / "stderr.log", "w") as errlog:
            try:
                anyio.run(measure, args, home, errlog)
            except BaseException:
                tail = (home / "stderr.log").read_text(errors="replace").splitlines()[-30:]
                print("--- last lines of the processes' stderr:", *tail, sep="\n", file=sys.stderr)
                raise


if __name__ == "__main__":
    main()
