"""emceepee's overhead, measured against a direct connection to the same backend in the same run.

    python benchmarks/bench.py [--calls N]

Two real MCP clients (the SDK's `Client`, handshake era) drive two real subprocesses: the example
backend `examples/servers/echo.py` directly, and `emceepee serve` with that same backend as its only
server (a throwaway EMCEEPEE_HOME, so nothing of yours is read or written). It measures:

1. per-call latency of echo's `echo` tool, direct vs through `execute_tool` (calls interleaved);
2. wall time of 50 concurrent `slow(0.05 s)` calls, against the ideal 50 ms;
3. how soon `await_activity` returns after a promoted task finishes;
4. how soon a backend receives an answer written to the journal the way `emceepee answer` writes
   it (the CLI's process start excluded), with the example backend `elicit.py` asking.

This is not a test: it prints figures and one "ok"/"MISSED" line per target, and always exits 0
(unless something breaks outright).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]
ECHO = ROOT / "examples" / "servers" / "echo.py"
ELICIT = ROOT / "examples" / "servers" / "elicit.py"

STARTUP_S = 30.0  # connect + the backend becoming ready
CALL_S = 10.0  # any single call (or one round of concurrent calls)
SESSION_S = 120.0  # the whole session, plus 0.1 s per sequential call pair
WARMUP_CALLS = 20
CONCURRENT = 50
SLOW_S = 0.05
CONCURRENCY_ROUNDS = 5
WAKE_REPS = 20
WAKE_SLOW_S = 0.2

TARGET_OVERHEAD = 1.3  # emceepee/direct, median per-call latency
TARGET_CONCURRENCY = 1.2  # emceepee wall time / ideal
TARGET_WAKE_MS = 5.0  # await_activity return after the task's end
ANSWER_REPS = 20
TARGET_ANSWER_MS = 200.0  # journal answer -> the backend has it, median

Call = Callable[[], Awaitable[Any]]


# --------------------------------------------------------------------------- helpers


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def iso_epoch(stamp: str) -> float:
    """emceepee's `created_at` (UTC, ms, trailing Z) as epoch seconds."""
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def note(message: str) -> None:
    print(f"  … {message}", file=sys.stderr, flush=True)


async def timed(call: Call) -> tuple[float, Any]:
    """(seconds, result) of one call, bounded."""
    with anyio.fail_after(CALL_S):
        start = time.perf_counter()
        result = await call()
        return time.perf_counter() - start, result


def structured(result: Any) -> dict[str, Any]:
    return result.structured_content or {}


def write_config(home: Path) -> Path:
    config = home / "config.toml"
    log = json.dumps(str(home / "elicit.log"))
    config.write_text(
        f"[servers.echo]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(ECHO))}]\n\n"
        f"[servers.elicit]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(ELICIT))}]\n"
        f"env = {{ EMCEEPEE_EXAMPLE_LOG = {log} }}\n"
    )
    return config


def direct_client(errlog: TextIO) -> Client:
    params = StdioServerParameters(command=sys.executable, args=[str(ECHO)], cwd=ROOT)
    return Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None)


def emceepee_client(home: Path, config: Path, errlog: TextIO) -> Client:
    env = {k: v for k, v in os.environ.items() if k not in ("EMCEEPEE_CONFIG", "EMCEEPEE_DB")}
    env["EMCEEPEE_HOME"] = str(home)
    env["EMCEEPEE_FLEET"] = "0"  # serve in-process: benchmarks/fleet.py weighs the fleet against it
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "emceepee_cli", "serve", "--config", str(config)],
        env=env,
        cwd=ROOT,
    )
    return Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None)


# --------------------------------------------------------------------------- measurements


async def warm_up(direct: Client, mux: Client) -> None:
    with anyio.fail_after(STARTUP_S):
        listed = structured(await mux.call_tool("list_tools", {"server": "echo"}))
    group = next((g for g in listed.get("servers", []) if g.get("server") == "echo"), {})
    if group.get("status") != "ready":
        raise SystemExit(f"emceepee's echo backend is not ready: {json.dumps(listed)[:500]}")
    for _ in range(WARMUP_CALLS):
        await timed(lambda: direct.call_tool("echo", {"text": "x"}))
        await timed(
            lambda: mux.call_tool("execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "x"}})
        )
    await timed(lambda: mux.call_tool("await_activity", {"timeout_ms": 0}))  # drain start-up events


async def per_call(direct: Client, mux: Client, calls: int) -> dict[str, Any]:
    """Sequential echo calls, direct and through emceepee interleaved (order alternating)."""
    d: list[float] = []
    m: list[float] = []
    errors = 0

    def direct_call() -> Awaitable[Any]:
        return direct.call_tool("echo", {"text": "x"})

    def mux_call() -> Awaitable[Any]:
        return mux.call_tool("execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "x"}})

    for i in range(calls):
        pair = [(direct_call, d), (mux_call, m)]
        for call, into in pair if i % 2 == 0 else reversed(pair):
            seconds, result = await timed(call)
            errors += bool(result.is_error) or result.content[0].text != "x"
            into.append(seconds)
    return {"direct": d, "emceepee": m, "errors": errors}


async def concurrent_wall(call: Call) -> tuple[float, int]:
    """Wall time of CONCURRENT calls started together; and how many came back promoted or in error."""
    odd = 0

    async def one() -> None:
        nonlocal odd
        result = await call()
        odd += bool(result.is_error) or "proxy_task" in structured(result)

    with anyio.fail_after(CALL_S):
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(CONCURRENT):
                tg.start_soon(one)
        return time.perf_counter() - start, odd


async def concurrency(direct: Client, mux: Client) -> dict[str, Any]:
    args = {"seconds": SLOW_S, "steps": 1}
    d: list[float] = []
    m: list[float] = []
    odd = 0
    for _ in range(CONCURRENCY_ROUNDS):
        seconds, bad = await concurrent_wall(lambda: direct.call_tool("slow", args))
        d.append(seconds)
        odd += bad
        seconds, bad = await concurrent_wall(
            lambda: mux.call_tool(
                "execute_tool", {"server": "echo", "tool": "slow", "args": args, "timeout_ms": 10_000}
            )
        )
        m.append(seconds)
        odd += bad
    return {"direct": d, "emceepee": m, "odd": odd}


async def direct_slow_overhead(direct: Client) -> float:
    """Seconds a direct slow(WAKE_SLOW_S) call takes beyond WAKE_SLOW_S (median of 5)."""
    runs = [
        (await timed(lambda: direct.call_tool("slow", {"seconds": WAKE_SLOW_S, "steps": 1})))[0]
        for _ in range(5)
    ]
    return statistics.median(runs) - WAKE_SLOW_S


async def wake(mux: Client, slow_overhead: float) -> dict[str, Any]:
    by_event: list[float] = []
    by_clock: list[float] = []
    problems: list[str] = []
    for _ in range(WAKE_REPS):
        await timed(lambda: mux.call_tool("await_activity", {"timeout_ms": 0}))  # drain anything pending
        started = time.time()
        _, result = await timed(
            lambda: mux.call_tool(
                "execute_tool",
                {
                    "server": "echo",
                    "tool": "slow",
                    "args": {"seconds": WAKE_SLOW_S, "steps": 1},
                    "timeout_ms": 1,
                },
            )
        )
        task = structured(result).get("proxy_task")
        if not task:
            problems.append("slow call was not promoted to a task")
            continue
        finished: dict[str, Any] | None = None
        with anyio.fail_after(CALL_S):
            while finished is None:  # another event could wake it first; wait again until ours arrives
                result = await mux.call_tool("await_activity", {"timeout_ms": 10_000})
                returned = time.time()
                events = structured(result).get("events", [])
                finished = next(
                    (
                        e
                        for e in events
                        if e.get("type") == "task_status"
                        and e.get("data", {}).get("task_id") == task["task_id"]
                    ),
                    None,
                )
        if finished["data"].get("status") != "completed":
            problems.append(f"task ended {finished['data'].get('status')}")
            continue
        by_event.append(returned - iso_epoch(finished["created_at"]))
        by_clock.append(returned - (started + WAKE_SLOW_S + slow_overhead))
    return {"by_event": by_event, "by_clock": by_clock, "problems": problems}


# --------------------------------------------------------------------------- report


async def answer_latency(mux: Client, home: Path) -> list[float]:
    """Seconds from the journal write `emceepee answer` makes to the backend logging the answer."""
    from emceepee_cli.store.journal import Journal

    journal = Journal(home / "data" / "journal.db")
    log = home / "elicit.log"
    answer = {"action": "accept", "content": {"name": "bench"}}
    out: list[float] = []
    for _ in range(ANSWER_REPS):
        with anyio.fail_after(CALL_S):
            promoted = structured(
                await mux.call_tool(
                    "execute_tool", {"server": "elicit", "tool": "ask", "args": {}, "timeout_ms": 10_000}
                )
            )
            request_id = promoted["saga"]["steps"][0]["step_id"]
            size = log.stat().st_size if log.exists() else 0
            started = time.perf_counter()
            settle = functools.partial(
                journal.pending.settle, request_id, "accepted", answer=answer, by="cli"
            )
            await anyio.to_thread.run_sync(settle)
            while not log.exists() or log.stat().st_size == size:  # noqa: ASYNC110 - polling the log is the measurement
                await anyio.sleep(0.0005)
            out.append(time.perf_counter() - started)
            await mux.call_tool("get_task_result", {"task_id": promoted["proxy_task"]["task_id"]})
            await mux.call_tool("await_activity", {"timeout_ms": 0})
    journal.close()
    return out


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f}"


def spread(values: list[float]) -> str:
    """Median, p95 and max, in ms, in columns."""
    return f"{ms(statistics.median(values)):>9}{ms(pct(values, 95)):>9}{ms(max(values)):>9}"


def report(
    calls: int,
    pc: dict[str, Any],
    cc: dict[str, Any],
    wk: dict[str, Any],
    slow_overhead: float,
    an: list[float],
) -> None:
    d, m = pc["direct"], pc["emceepee"]
    d50, d95, m50, m95 = statistics.median(d), pct(d, 95), statistics.median(m), pct(m, 95)
    ideal = SLOW_S
    cd, cm = statistics.median(cc["direct"]), statistics.median(cc["emceepee"])
    rule = "-" * 72
    system = f"{platform.system()} {platform.machine()}"
    print(f"emceepee benchmark  (python {platform.python_version()}, mcp {version('mcp')}, {system})")
    print(rule)
    print(f"1. per-call latency, echo(text='x'), {calls} sequential calls each")
    print(f"   {'':26}{'direct':>10}{'emceepee':>10}{'ratio':>10}")
    print(f"   {'median (ms)':26}{ms(d50):>10}{ms(m50):>10}{m50 / d50:>9.2f}x")
    print(f"   {'p95 (ms)':26}{ms(d95):>10}{ms(m95):>10}{m95 / d95:>9.2f}x")
    print(f"   {'added per call, median (ms)':26}{'':>10}{ms(m50 - d50):>10}")
    if pc["errors"]:
        print(f"   !! {pc['errors']} call(s) came back as errors or with the wrong text")
    print(rule)
    print(
        f"2. {CONCURRENT} concurrent slow(seconds={SLOW_S}, steps=1), "
        f"median of {CONCURRENCY_ROUNDS} rounds (ideal {ideal * 1000:.0f} ms)"
    )
    print(f"   {'':26}{'direct':>10}{'emceepee':>10}")
    print(f"   {'wall (ms)':26}{ms(cd):>10}{ms(cm):>10}")
    print(f"   {'wall / ideal':26}{cd / ideal:>9.2f}x{cm / ideal:>9.2f}x")
    print(f"   {'emceepee / direct':26}{'':>10}{cm / cd:>9.2f}x")
    print(
        f"   rounds (ms): direct {' '.join(f'{x * 1000:.0f}' for x in cc['direct'])}; "
        f"emceepee {' '.join(f'{x * 1000:.0f}' for x in cc['emceepee'])}"
    )
    if cc["odd"]:
        print(f"   !! {cc['odd']} call(s) came back promoted to a task or as errors")
    print(rule)
    be, bc = wk["by_event"], wk["by_clock"]
    print(f"3. await_activity wake after a promoted slow({WAKE_SLOW_S}) finishes, {len(be)} reps (ms)")
    print(f"   {'':42}{'median':>9}{'p95':>9}{'max':>9}")
    if be:
        print(f"   {'return - event created_at (ms floor)':42}{spread(be)}")
        print(f"   {f'return - (start + {WAKE_SLOW_S:g} s + direct ovh)':42}{spread(bc)}")
        print(
            f"   (direct slow-call overhead used: {slow_overhead * 1000:.2f} ms;"
            " created_at is floored to the ms)"
        )
    for problem in sorted(set(wk["problems"])):
        print(f"   !! {wk['problems'].count(problem)}x {problem}")
    print(rule)
    print(f"4. answer written to the journal -> the backend has it, {len(an)} reps (ms)")
    print(f"   {'':42}{'median':>9}{'p95':>9}{'max':>9}")
    print(f"   {'journal write -> backend logs the answer':42}{spread(an)}")
    print(rule)
    wake_ms = statistics.median(be) * 1000 if be else math.inf
    targets = [
        (
            "per-call overhead",
            f"median ratio {m50 / d50:.2f}x (p95 {m95 / d95:.2f}x), target <= {TARGET_OVERHEAD}x",
            m50 / d50 <= TARGET_OVERHEAD,
        ),
        (
            "concurrency",
            f"emceepee wall {cm / ideal:.2f}x ideal (direct {cd / ideal:.2f}x), "
            f"target <= {TARGET_CONCURRENCY}x",
            cm / ideal <= TARGET_CONCURRENCY,
        ),
        (
            "await_activity wake",
            f"median {wake_ms:.2f} ms (p95 {pct(be, 95) * 1000 if be else math.inf:.2f} ms), "
            f"target <= {TARGET_WAKE_MS:g} ms",
            wake_ms <= TARGET_WAKE_MS,
        ),
        (
            "answer latency",
            f"median {statistics.median(an) * 1000:.1f} ms (p95 {pct(an, 95) * 1000:.1f} ms), "
            f"target <= {TARGET_ANSWER_MS:g} ms",
            statistics.median(an) * 1000 <= TARGET_ANSWER_MS,
        ),
    ]
    for name, detail, ok in targets:
        print(f"target {name:<20} {detail:<62} {verdict(ok)}")


async def measure(calls: int, home: Path, direct_err: TextIO, serve_err: TextIO) -> None:
    config = write_config(home)
    # One bound over the whole session (start, measurements, shutdown): a cancel scope may not be
    # left while a client's task group opened inside it is still open.
    with anyio.fail_after(SESSION_S + 0.1 * calls):
        async with direct_client(direct_err) as direct, emceepee_client(home, config, serve_err) as mux:
            note("warming up")
            await warm_up(direct, mux)
            note(f"1/3 per-call latency ({calls} calls each side)")
            pc = await per_call(direct, mux, calls)
            note("2/4 concurrency")
            cc = await concurrency(direct, mux)
            note("3/4 await_activity wake")
            slow_overhead = await direct_slow_overhead(direct)
            wk = await wake(mux, slow_overhead)
            note("4/4 answer latency")
            an = await answer_latency(mux, home)
    report(calls, pc, cc, wk, slow_overhead, an)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--calls",
        type=int,
        default=300,
        help="sequential calls per side for the latency figures (default 300)",
    )
    calls = max(1, parser.parse_args().calls)
    with tempfile.TemporaryDirectory(prefix="emceepee-bench-") as tmp:
        home = Path(tmp)  # EMCEEPEE_HOME of the emceepee under test; the processes' stderr lands here too
        with open(home / "direct.stderr", "w") as direct_err, open(home / "serve.stderr", "w") as serve_err:
            try:
                anyio.run(measure, calls, home, direct_err, serve_err)
            except BaseException:
                for name in ("serve.stderr", "direct.stderr"):  # the temp folder is about to go: show why
                    tail = (home / name).read_text(errors="replace").splitlines()[-20:]
                    print(f"--- last lines of {name}:", *tail, sep="\n", file=sys.stderr)
                raise


if __name__ == "__main__":
    main()
