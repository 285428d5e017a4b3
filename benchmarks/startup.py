"""How long `emceepee` commands take to start and finish, as whole processes.

    python benchmarks/startup.py [--runs N]

Each command runs N times (after one warm-up) against a throwaway EMCEEPEE_HOME holding a small
config and a journal with a few tasks, so nothing of yours is read or written. It prints the
median and the spread of the wall time of each, against its target, and what it imports that a
fast start must not (pydantic, the MCP SDK, sqlite-utils…), from `python -X importtime`.

This is not a test: it prints figures and one "ok"/"MISSED" line per target, and exits 0. The
machine's load moves the figures; compare medians taken on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES: list[tuple[str, list[str], dict[str, str], float]] = [
    ("--version", ["--version"], {}, 0.150),
    ("--help", ["--help"], {}, 0.150),
    (
        "TAB: a command",
        [],
        {"_EMCEEPEE_COMPLETE": "complete_bash", "COMP_WORDS": "emceepee ta", "COMP_CWORD": "1"},
        0.150,
    ),
    (
        "TAB: a server name",
        [],
        {"_EMCEEPEE_COMPLETE": "complete_bash", "COMP_WORDS": "emceepee servers show e", "COMP_CWORD": "3"},
        0.150,
    ),
    ("tasks list", ["tasks", "list"], {}, 0.300),
    ("servers list", ["servers", "list"], {}, 0.300),
]
HEAVY = ("pydantic", "mcp", "mcp_types", "anyio", "sqlite_utils", "jsonschema", "regex", "rich")
TIMEOUT_S = 60.0


def command() -> list[str]:
    script = Path(sys.executable).parent / "emceepee"
    return [str(script)] if script.exists() else [sys.executable, "-m", "emceepee_cli"]


def prepare(home: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text('[servers.echo]\ncommand = "python3"\nargs = ["echo.py"]\n')
    from emceepee_cli.store.journal import Journal

    Journal(home / "data" / "journal.db").close()


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, timeout=TIMEOUT_S, check=False)
    return time.perf_counter() - started


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "emceepee_cli", *argv[len(command()) :]],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    return sorted({name.split(".")[0] for name in names if name.split(".")[0] in HEAVY})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="emceepee-startup-") as folder:
        home = Path(folder) / "home"
        prepare(home)
        base = {**os.environ, "EMCEEPEE_HOME": str(home), "EMCEEPEE_FLEET": "0"}  # no fleet left behind
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} cores, {runs} runs each (after one warm-up)"
        )
        print(f"{'command':<20} {'median':>8} {'min':>8} {'max':>8} {'target':>8}  imports")
        for name, args, extra, target in CASES:
            argv, env = [*command(), *args], {**base, **extra}
            timed(argv, env)
            times = [timed(argv, env) for _ in range(runs)]
            median = statistics.median(times)
            verdict = "ok" if median <= target else "MISSED"
            heavy = ", ".join(heavy_imports(argv, env)) or "-"
            print(
                f"{name:<20} {median * 1000:7.0f}ms {min(times) * 1000:7.0f}ms {max(times) * 1000:7.0f}ms "
                f"{target * 1000:7.0f}ms  {heavy}  {verdict}"
            )


if __name__ == "__main__":
    main()
