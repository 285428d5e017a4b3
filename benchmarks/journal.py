"""The journal at scale: how long the listings take, and how each cost grows with the rows.

    python benchmarks/journal.py [--sizes 10000,100000,1000000] [--repeat 7]

For each size N (events), a journal is built in a temp folder with N events, N/10 finished tasks
spread over 30 days, N/100 answered questions, N/1000 stopped `serve` instances, plus a live
instance (this process) with a few working tasks and open questions — written in one transaction
with executemany, so building 1M events takes seconds. Then it times the journal work of:

- `list_tasks` as the meta-tool runs it: working tasks, the first page with include_completed,
  the next page through the cursor, a page filtered by server and by status;
- `emceepee tasks list --all` and `emceepee pending` as the CLI runs them (opening the journal,
  settling dead processes' rows, the listing), in this process, rendering excluded;
- `get_task` by an 8-character prefix, and what a starting `serve` does (`take_over`'s queries);
- retention: the purge of everything older than a day in bounded batches (the longest batch is
  what serve's other journal work can wait behind), then giving the freed pages back; the file's
  size before and after, and a steady state (a day's rows added and purged, five times).

Each figure is the median of --repeat runs, in ms. The growth column is the ratio to the same
figure at the previous size (10x the rows): about 1 is flat, about 10 linear, more is worse.
Not a test: it prints figures and one "ok"/"MISSED" line per goal, and exits 0.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ulid import ULID

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from emceepee_cli import start_tokens  # noqa: E402 - after the path is set
from emceepee_cli.cli.tasks import open_journal  # noqa: E402
from emceepee_cli.store.journal import Journal  # noqa: E402
from emceepee_cli.store.pages import TaskFilter  # noqa: E402
from emceepee_cli.store.records import task_json  # noqa: E402

GOAL_MS = 50.0
DAYS = 30
SERVERS = ("git", "fetch", "time", "everything", "files")
STATUSES = ("completed",) * 8 + ("failed", "cancelled", "expired", "interrupted")
RETENTION_S = 86_400
LIVE = "LIVE" + "0" * 22
RESULT = json.dumps({"content": [{"type": "text", "text": "x" * 300}], "isError": False})
QUESTION = json.dumps({"message": "Which branch?", "requested_schema": {"type": "object"}})
ANSWER = json.dumps({"action": "accept", "content": {"branch": "main"}})
TASK_COLUMNS = (
    "task_id, instance_id, server, tool, args, status, status_message, progress, result, error,"
    " created_at, last_updated_at, expires_at, finished_at, cancel_requested, request_state, round"
)
TASK_INSERT = f"INSERT INTO tasks ({TASK_COLUMNS}) VALUES ({', '.join('?' * 17)})"


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
SERIES = "WITH RECURSIVE s(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM s WHERE n + 1 < :count)"


# ---- building a journal: rows made by SQLite itself, a million in seconds ------------------


def ulid_sql(ms: str, tail: str) -> str:
    """SQL for a ULID made at `ms` (milliseconds) whose last 16 digits are the counter `tail`."""
    stamp = " || ".join(
        f"substr('{CROCKFORD}', (({ms}) >> {shift}) % 32 + 1, 1)" for shift in range(45, -5, -5)
    )
    return f"({stamp} || printf('%016d', {tail}))"


def iso_sql(ms: str) -> str:
    return f"strftime('%Y-%m-%dT%H:%M:%fZ', ({ms}) / 1000.0, 'unixepoch')"


def pick_sql(n: str, choices: tuple[str, ...]) -> str:
    whens = " ".join(f"WHEN {i} THEN '{c}'" for i, c in enumerate(choices))
    return f"(CASE ({n}) % {len(choices)} {whens} END)"


def build(path: Path, events: int, *, end: datetime | None = None, days: float = DAYS) -> None:
    """A journal at `path` (new, or one to add to) with `events` events over `days` up to `end`,
    and the tasks, questions and instances that go with them."""
    end_ms = int((end or datetime.now(UTC)).timestamp() * 1000)
    span = {"start": end_ms - int(days * 86_400_000), "end": end_ms}
    journal = Journal(path)
    db = journal.db
    instances = max(events // 1000, 2)
    owner = ulid_sql(
        f":start + (n * {instances} / :count) * (:end - :start) / {instances}", f"n * {instances} / :count"
    )
    db.execute("PRAGMA synchronous = OFF")  # a throwaway file: it need not survive a power cut
    db.execute("BEGIN")
    at = "(:start + n * (:end - :start) / :count)"
    db.execute(
        f"{SERIES} INSERT OR IGNORE INTO instances"
        " (instance_id, pid, machine, started_at, heartbeat_at, stopped_at)"
        f" SELECT {owner}, 1000000 + n, 'bench', {iso_sql(at)}, {iso_sql(at)}, {iso_sql(at)} FROM s",
        {**span, "count": instances},
    )
    db.execute(
        f"{SERIES} INSERT INTO events (event_id, instance_id, type, server, data, created_at)"
        f" SELECT id, {owner}, 'task_finished', server,"
        """ '{"task_id": "' || id || '", "status": "completed", "tool": "read_file","""
        """ "server": "' || server || '"}', """
        f"{iso_sql(at)} FROM (SELECT n, {ulid_sql(at, 'n')} AS id,"
        f" {pick_sql('n', SERVERS)} AS server FROM s)",
        {**span, "count": events},
    )
    done = f"({at} + (n * 7919) % 600000)"
    db.execute(
        f"{SERIES} INSERT INTO tasks ({TASK_COLUMNS})"
        f" SELECT {ulid_sql(at, 'n')}, {owner}, {pick_sql('n', SERVERS)}, 'read_file',"
        """ '{"path": "/src/app/module_' || n || '.py"}', status, NULL, NULL,"""
        f" CASE status WHEN 'completed' THEN '{RESULT}' END,"
        " CASE status WHEN 'completed' THEN NULL"
        " ELSE 'The call was ' || status || ': ' || printf('%.120c', 'y') END,"
        f" {iso_sql(at)}, {iso_sql(done)}, {iso_sql(at + ' + 300000')}, {iso_sql(done)}, 0, NULL, NULL"
        f" FROM (SELECT n, {pick_sql('n', STATUSES)} AS status FROM s)",
        {**span, "count": events // 10},
    )
    db.execute(
        f"{SERIES} INSERT INTO pending (request_id, instance_id, server, kind, params, status, correlation,"
        " created_at, expires_at, answered_at, answered_by, answer)"
        f" SELECT {ulid_sql(at, 'n')}, {owner}, {pick_sql('n', SERVERS)}, 'elicitation', '{QUESTION}',"
        f" 'accepted', 'sole', {iso_sql(at)}, {iso_sql(at + ' + 600000')}, {iso_sql(at + ' + 30000')},"
        f" 'cli', '{ANSWER}' FROM s",
        {**span, "count": events // 100},
    )
    # every stopped instance delivered all its events
    db.execute("INSERT OR IGNORE INTO cursors SELECT instance_id, '~', heartbeat_at FROM instances")
    _live(db, end_ms)
    db.execute("COMMIT")
    journal.close()


def _live(db: Any, end_ms: int) -> None:
    """This process, as a live `serve` with a few working tasks and open questions."""
    me, now = os.getpid(), iso_ms(end_ms)
    db.execute(
        "INSERT OR REPLACE INTO instances (instance_id, pid, machine, started_at, heartbeat_at, proc_start)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [LIVE, me, socket.gethostname(), now, now, start_tokens.start_token(me)],
    )
    for k in range(5):
        db.execute(
            f"INSERT OR IGNORE INTO tasks ({TASK_COLUMNS}) VALUES (?, ?, 'git', 'git_log', '{{}}', 'working',"
            " 'running', NULL, NULL, NULL, ?, ?, ?, NULL, 0, NULL, NULL)",
            [str(ULID.from_int((end_ms << 80) | 1 << 79 | k)), LIVE, now, now, iso_ms(end_ms + 300_000)],
        )
    for k in range(3):
        db.execute(
            "INSERT OR IGNORE INTO pending (request_id, instance_id, server, kind, params, status,"
            " correlation, created_at, expires_at)"
            " VALUES (?, ?, 'git', 'elicitation', ?, 'pending', 'sole', ?, ?)",
            [str(ULID.from_int((end_ms << 80) | 1 << 79 | k)), LIVE, QUESTION, now, iso_ms(end_ms + 600_000)],
        )


def iso_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")[:23] + "Z"


# ---- timing ---------------------------------------------------------------------------------


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm: the page cache, SQLite's statement cache
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def queries(path: Path) -> dict[str, Callable[[], object]]:
    """The journal work behind each listing, each on its own connection (as each process has one)."""
    serve = Journal(path)
    serve.connection.owner = LIVE
    first = serve.tasks.page(TaskFilter(include_finished=True), None, 50)
    newest = serve.tasks.page(TaskFilter(status="completed"), None, 1)["tasks"][0]["task_id"]

    def cli_tasks_list() -> object:
        journal = open_journal(path)
        try:
            return journal.tasks.page(TaskFilter(include_finished=True), None, 50)
        finally:
            journal.close()

    def cli_pending() -> object:
        journal = open_journal(path)
        try:
            return journal.pending.rows()
        finally:
            journal.close()

    def serve_start() -> object:
        serve.instances.interrupt_orphans()
        serve.instances.adopt_orphans(LIVE)
        return serve.instances.dead()

    return {
        "unpaged, as before: include_completed": lambda: json.dumps(
            [task_json(r) for r in serve.tasks.rows(include_finished=True)]
        ),
        "list_tasks (working)": lambda: serve.tasks.page(TaskFilter(), None, 50),
        "list_tasks include_completed, page 1": lambda: serve.tasks.page(
            TaskFilter(include_finished=True), None, 50
        ),
        "list_tasks include_completed, page 2": lambda: serve.tasks.page(
            TaskFilter(include_finished=True), first["next_cursor"], 50
        ),
        "list_tasks server=git, page 1": lambda: serve.tasks.page(
            TaskFilter(server="git", include_finished=True), None, 50
        ),
        "list_tasks status=failed, page 1": lambda: serve.tasks.page(TaskFilter(status="failed"), None, 50),
        "emceepee tasks list --all": cli_tasks_list,
        "emceepee pending": cli_pending,
        "get_task by 8-char prefix": lambda: serve.tasks.resolve(newest[:8]),
        "serve start (settle, adopt)": serve_start,
    }


LISTINGS = ("list_tasks", "emceepee tasks list --all", "emceepee pending")


def purge(path: Path) -> dict[str, float]:
    """Purge what is older than a day, batch by batch, then give the space back, step by step:
    the batches' and steps' times (what serve's other journal work may wait behind) and the file's size."""
    journal = Journal(path)
    before = size(path)
    batches = timed_until_zero(lambda: journal.retention.purge_batch(RETENTION_S))
    purged = size(path)
    steps = timed_until_zero(journal.retention.compact)
    journal.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    journal.close()
    return {
        "purge batches": len(batches),
        "purge batch ms, median": statistics.median(batches),
        "purge batch ms, 90th percentile": percentile(batches, 0.9),
        "purge batch ms, longest": max(batches),
        "purge total s": sum(batches) / 1000,
        "vacuum steps": len(steps),
        "vacuum step ms, median": statistics.median(steps),
        "vacuum step ms, longest": max(steps),
        "vacuum total s": sum(steps) / 1000,
        "file MB before": before,
        "file MB after purge": purged,
        "file MB after vacuum": size(path),
    }


def timed_until_zero(step: Callable[[], int]) -> list[float]:
    """Run `step` until it returns 0; each run's time in ms."""
    times = []
    while True:
        began = time.perf_counter()
        done = step()
        times.append((time.perf_counter() - began) * 1000)
        if not done:
            return times


def percentile(values: list[float], share: float) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * share))]


def steady(folder: Path, events: int) -> list[float]:
    """Six days: each adds a day's rows and purges what is older than a day; the file's size each day."""
    path = folder / "steady.db"
    sizes = []
    first = datetime.now(UTC) - timedelta(days=5)
    for day in range(6):
        end = first + timedelta(days=day)
        build(path, events, end=end, days=1)
        journal = Journal(path)
        while journal.retention.purge_batch(RETENTION_S, now=end):
            pass
        while journal.retention.compact():
            pass
        journal.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        journal.close()
        sizes.append(size(path))
    return sizes


def size(path: Path) -> float:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 1e6


# ---- the report -----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="event counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=7)
    opts = parser.parse_args()
    sizes = [int(s) for s in opts.sizes.split(",")]
    table: dict[str, list[float]] = {}
    purges: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="emceepee-journal-bench-") as tmp:
        os.environ["EMCEEPEE_HOME"] = tmp  # nothing of yours is read or written
        for n in sizes:
            path = Path(tmp) / f"j{n}.db"
            began = time.perf_counter()
            build(path, n)
            print(
                f"built {n:,} events, {n // 10:,} tasks in {time.perf_counter() - began:.1f} s"
                f" ({size(path):.0f} MB)",
                file=sys.stderr,
            )
            for name, fn in queries(path).items():
                table.setdefault(name, []).append(median_ms(fn, opts.repeat))
            for name, value in purge(path).items():
                purges.setdefault(name, []).append(value)
            for leftover in Path(tmp).glob(path.name + "*"):
                leftover.unlink()
        steady_sizes = steady(Path(tmp), sizes[0])
    report(sizes, table, purges, steady_sizes)


def report(
    sizes: list[int], table: dict[str, list[float]], purges: dict[str, list[float]], steady_sizes: list[float]
) -> None:
    head = "".join(f"{n:>12,}" for n in sizes)
    print(f"{'journal work, ms (median) / events:':<42}{head}   growth per 10x rows")
    for name, values in table.items():
        print(f"{name:<42}" + "".join(f"{v:>12.2f}" for v in values) + "   " + growth(values))
    print(f"\n{'retention (older than a day) / events:':<42}{head}")
    for name, values in purges.items():
        print(f"{name:<42}" + "".join(f"{v:>12,.1f}" for v in values))
    print(
        "\nsteady state, file MB per day (a day's rows added, older ones purged): "
        + ", ".join(f"{s:.1f}" for s in steady_sizes)
    )
    print()
    worst = {name: values[-1] for name, values in table.items() if name.startswith(LISTINGS)}
    for name, ms in worst.items():
        verdict = "ok" if ms <= GOAL_MS else "MISSED"
        print(f"{verdict:>6}  {name}: {ms:.1f} ms at {sizes[-1]:,} events (goal <= {GOAL_MS:.0f} ms)")
    flat = steady_sizes[-1] <= steady_sizes[1] * 1.2
    print(
        f"{'ok' if flat else 'MISSED':>6}  file size flat under steady retention: "
        f"{steady_sizes[1]:.1f} MB on day 1, {steady_sizes[-1]:.1f} MB on day 5"
    )


def growth(values: list[float]) -> str:
    return "  ".join(f"x{b / a:.1f}" if a > 0 else "-" for a, b in itertools.pairwise(values))


if __name__ == "__main__":
    main()
