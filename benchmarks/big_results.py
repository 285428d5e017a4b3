"""What big results cost `emceepee serve` in memory: its RSS peak while four arrive, and after.

    python benchmarks/big_results.py [--mb 60] [--calls 4] [--slow-lane] [--budget-mb N]

A real `emceepee serve` (a throwaway EMCEEPEE_HOME) in front of the hostile backend
(tests/backends/hostile.py, `big`: a text result of --mb MiB, written only once all --calls
calls are waiting, so they reach serve together), driven by a host on its pipes that first
lists servers and tools and makes a small call, as a host does. Two phases:

- inline   --calls concurrent execute_tool calls answered in time (the fast lane, unless
           --slow-lane sets EMCEEPEE_FAST_LANE=0);
- task     the same calls with timeout_ms=1, promoted to tasks (their results journaled), then
           fetched with get_task_result, concurrently.

For each phase: serve's RSS before, its peak during (VmHWM, reset first through clear_refs), and
after every reply is in (and after a short settle). Every result is checked whole (its length
and hash). Linux only (/proc). This is not a test: it prints figures and exits 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.backends.hostile import big_text
from tests.support import LineHost, hostile_table, serve_command

MB = 1024 * 1024
SETTLE_S = 2.0  # after the last reply, before "after settled" is read


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from the RSS now


def text_of(line: bytes) -> str:
    result = json.loads(line)["result"]
    assert not result.get("isError"), str(result)[:500]
    return str(result["content"][0]["text"])


async def phase(host: LineHost, name: str, mb: float, calls: int, promoted: bool) -> None:
    pid = host.process.pid
    expected = {i: hashlib.sha256(big_text(mb, i).encode()).hexdigest() for i in range(calls)}
    before = status_kb(pid, "VmRSS")
    reset_peak(pid)
    started = time.monotonic()
    lines: dict[int, bytes] = {}

    async def one(seed: int) -> None:
        args = {"mb": mb, "together": calls, "seed": seed}
        call = {"server": "h", "tool": "big", "args": args, "timeout_ms": 1 if promoted else 120_000}
        reply = await host.request("tools/call", {"name": "execute_tool", "arguments": call})
        if promoted:
            task = json.loads(reply)["result"]["structuredContent"]["proxy_task"]
            fetch = {"task_id": task["task_id"], "timeout_ms": 50_000}
            while True:
                reply = await host.request("tools/call", {"name": "get_task_result", "arguments": fetch})
                if b'"proxy_task"' not in reply[:1000] and b'"task":' not in reply[:200]:
                    break
        lines[seed] = reply

    async with anyio.create_task_group() as tg:
        for seed in range(calls):
            tg.start_soon(one, seed)
    took = time.monotonic() - started
    peak, after = status_kb(pid, "VmHWM"), status_kb(pid, "VmRSS")
    for seed, line in lines.items():
        text = text_of(line)
        assert len(text) == int(mb * MB) and hashlib.sha256(text.encode()).hexdigest() == expected[seed]
    lines.clear()
    await anyio.sleep(SETTLE_S)
    settled = status_kb(pid, "VmRSS")
    print(
        f"{name:7} {calls} x {mb:g} MiB in {took:5.1f} s: RSS before {before / 1024:6.0f} MiB, "
        f"peak {peak / 1024:6.0f} (+{(peak - before) / 1024:.0f}), after {after / 1024:6.0f} "
        f"(+{(after - before) / 1024:.0f}), settled {settled / 1024:6.0f} (+{(settled - before) / 1024:.0f})"
    )


async def main(mb: float, calls: int, slow_lane: bool, budget: float | None) -> None:
    with tempfile.TemporaryDirectory() as home:
        config = Path(home) / "config.toml"
        config.write_text(hostile_table("h", "--compact"))
        env = {k: v for k, v in os.environ.items() if k not in ("EMCEEPEE_CONFIG", "EMCEEPEE_DB")}
        env["EMCEEPEE_HOME"] = home
        env["EMCEEPEE_FLEET"] = "0"  # serve's own RSS: in-process (the fleet would hold the results)
        if budget is not None:
            env["EMCEEPEE_RESULT_BUDGET_MB"] = str(budget)
        if slow_lane:
            env["EMCEEPEE_FAST_LANE"] = "0"
        async with await anyio.open_process(serve_command(config), env=env) as process:
            host = LineHost(process)
            async with anyio.create_task_group() as tg:
                tg.start_soon(host.read)
                await host.initialize()
                await host.request("tools/list", {})
                await host.tool("list_servers", {})
                while (
                    "tools"
                    not in (await host.tool("list_tools", {"server": "h"}))["structuredContent"]["servers"][0]
                ):
                    pass
                echo: dict[str, Any] = {"server": "h", "tool": "echo", "args": {"text": "hi"}}
                await host.tool("execute_tool", echo)
                print(f"serve pid {process.pid}, lane: {'slow' if slow_lane else 'fast'}")
                await phase(host, "inline", mb, calls, promoted=False)
                await phase(host, "task", mb, calls, promoted=True)
                assert process.stdin is not None
                await process.stdin.aclose()
                tg.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=60)
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--slow-lane", action="store_true")
    parser.add_argument("--budget-mb", type=float, help="EMCEEPEE_RESULT_BUDGET_MB for serve")
    opts = parser.parse_args()
    anyio.run(main, opts.mb, opts.calls, opts.slow_lane, opts.budget_mb)
