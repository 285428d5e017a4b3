"""The `instances` table: which emceepee processes own which rows, and what happens when one is gone.

Every `serve` registers itself (pid, machine, and the process's start time) and beats a heartbeat.
An owner is dead only when its process is gone: on this machine that is decided by pid *and*
start time (emceepee_cli/start_tokens.py), so a live process is never declared dead however stale its
heartbeat (a suspended laptop, a SIGSTOP, a long lock). The heartbeat decides only where the
process cannot be checked: a row from another machine, or one written by an emceepee that did
not record a start time.

What a dead owner left is settled by whoever looks first (a `serve` starting, any CLI command):
its running calls become `interrupted` and its questions `rejected`, except a 2026-07-28 call
suspended on input, which one `serve` claims (an atomic `UPDATE … WHERE instance_id = <dead>`)
and re-drives. A live `serve` that finds its own rows settled so by mistake (by an older
emceepee, or a CLI on a machine that can only go by the heartbeat) takes them back: `reclaim`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Collection
from typing import Any, cast

from emceepee_cli import processes, start_tokens
from emceepee_cli.clock import now_iso
from emceepee_cli.store.connection import Connection, Part
from emceepee_cli.store.db import immediate, mapped
from emceepee_cli.store.liveness import RECENT_FLEET_SESSIONS, RETURN_S, instance_alive
from emceepee_cli.store.liveness import STALE_ENV as STALE_ENV  # re-exported: used under these names
from emceepee_cli.store.liveness import heartbeat_s as heartbeat_s
from emceepee_cli.store.orphans import ORPHANED
from emceepee_cli.store.records import ElicitationStatus, InstanceRow, TaskStatus
from emceepee_cli.store.tables.tasks import Tasks

# A call another serve can take over: one suspended on 2026-07-28 input, or one resuming itself
# with a backend's resume token (both have what the next request needs in the row).
ADOPTABLE = "(request_state IS NOT NULL OR (resume_token IS NOT NULL AND coalesce(auto_resume, 0) = 1))"


class Instances(Part):
    """The journal's instances (`journal.instances`) and what dead ones left.

    Holds the journal's connection, and its `tasks`, through which a dead instance's calls end as
    `interrupted` (first writer wins, as for every task's end). Lifetime: the journal's.
    """

    def __init__(self, connection: Connection, tasks: Tasks) -> None:
        super().__init__(connection)
        self.tasks = tasks

    @mapped
    def register(self, instance_id: str) -> None:
        """Register this process as `instance_id`; the first one it registers is the journal's owner."""
        self.db.table("instances").insert(dict(this_instance(instance_id)))
        self.connection.owner = self.connection.owner or instance_id

    @mapped
    def heartbeat(self, instance_id: str) -> None:
        self.db.execute(
            "UPDATE instances SET heartbeat_at = ? WHERE instance_id = ?", [now_iso(), instance_id]
        )

    @mapped
    def set_host(self, instance_id: str, name: str | None, version: str | None) -> None:
        self.db.execute(
            "UPDATE instances SET host_name = ?, host_version = ? WHERE instance_id = ?",
            [name, version, instance_id],
        )

    @mapped
    def stop(self, instance_id: str) -> None:
        self.db.execute("UPDATE instances SET stopped_at = ? WHERE instance_id = ?", [now_iso(), instance_id])

    def returning(self) -> set[str]:
        """The fleet sessions heard from within `RETURN_S`: their hosts' fronts may yet come back."""
        rows = self._rows(RECENT_FLEET_SESSIONS, [now_iso(-RETURN_S)])
        return {r["instance_id"] for r in rows}

    def alive(self, row: InstanceRow) -> bool:
        """Whether the instance's process still runs (store/liveness.py)."""
        return instance_alive(row)

    @mapped
    def row(self, instance_id: str) -> InstanceRow | None:
        rows = list(self.db.table("instances").rows_where("instance_id = ?", [instance_id]))
        return cast(InstanceRow, rows[0]) if rows else None

    def under_serve(self, pid: int) -> str | None:
        """Why process `pid` may descend from a live `serve` (a backend it started, or anything such a
        backend ran: the model's reach, never a person's), or None if it does not. Too many processes
        above it to look through counts as under one."""
        above = processes.ancestors(pid)
        if len(above) >= processes.MAX_ANCESTORS:
            deep = processes.MAX_ANCESTORS
            return f"it runs under more than {deep} processes, too many to tell whether one is a serve"
        if not above:
            return None
        marks = ",".join("?" * len(above))
        rows = self._rows(f"SELECT * FROM instances WHERE stopped_at IS NULL AND pid IN ({marks})", above)
        serve = next((inst for inst in map(as_instance, rows) if self.alive(inst)), None)
        return None if serve is None else f"it runs under emceepee serve (pid {serve['pid']})"

    def dead(self) -> list[InstanceRow]:
        sql = (
            "SELECT DISTINCT i.* FROM instances i WHERE i.instance_id IN (SELECT instance_id FROM tasks"
            " WHERE status = ? UNION SELECT instance_id FROM pending WHERE status = ?)"
        )
        rows = self._rows(sql, [TaskStatus.WORKING.value, ElicitationStatus.PENDING.value])
        return [inst for inst in map(as_instance, rows) if not self.alive(inst)]

    def _rows(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        """A query's rows, read to the end before the caller writes: a write made while a read is
        still open cannot wait for the lock (SQLite says "locked" at once when another wrote meanwhile)."""
        return list(self.db.query(sql, params))

    @mapped
    def interrupt_orphans(self) -> list[str]:
        """What a dead instance left running: its calls become `interrupted` and its questions `rejected`.

        A 2026-07-28 call suspended on input is kept (its `request_state` is journaled): the next
        `serve` adopts it and re-drives it once its questions are answered. So is a call resuming
        itself with a backend's resume token: the next `serve` re-issues it with that token.
        """
        done: list[str] = []
        noticed = now_iso()
        for inst in self.dead():
            params = [inst["instance_id"], TaskStatus.WORKING.value]
            for row in self._rows(
                "SELECT task_id, created_at, last_updated_at FROM tasks "
                f"WHERE instance_id = ? AND status = ? AND NOT {ADOPTABLE}",
                params,
            ):
                error = f"{orphaned(inst, row, noticed)}; the backend call was lost"
                if self.tasks.finish(row["task_id"], TaskStatus.INTERRUPTED, error=error):
                    done.append(row["task_id"])
            for row in self._rows(
                "SELECT request_id, created_at FROM pending WHERE instance_id = ? AND status = ? AND "
                "(task_id IS NULL OR task_id NOT IN "
                f"(SELECT task_id FROM tasks WHERE {ADOPTABLE} AND status = ?))",
                [inst["instance_id"], ElicitationStatus.PENDING.value, TaskStatus.WORKING.value],
            ):
                self.db.execute(
                    "UPDATE pending SET status = ?, error = ?, answered_at = ?"
                    " WHERE request_id = ? AND status = ?",
                    [
                        ElicitationStatus.REJECTED.value,
                        f"{orphaned(inst, row, noticed)}; the backend is no longer waiting for this answer",
                        noticed,
                        row["request_id"],
                        ElicitationStatus.PENDING.value,
                    ],
                )
        return done

    @mapped
    def adopt_orphans(self, instance_id: str, only: str | None = None, spare: bool = False) -> list[str]:
        """Claim the adoptable calls (and their questions) of dead instances (`only`: of that one,
        the session a host had in a fleet that died, fleet/hello.py's `previous`; `spare`: not
        those of a fleet's sessions heard from within `RETURN_S`, which their hosts may yet take back).

        Each call is claimed by one atomic UPDATE that names the dead owner, so when several
        `serve`s start together exactly one of them wins it, and only the winner re-drives it.
        """
        adopted: list[str] = []
        spared = self.returning() if spare and only is None else set()
        for inst in self.dead():
            if (only is not None and inst["instance_id"] != only) or inst["instance_id"] in spared:
                continue
            rows = self._rows(
                f"SELECT task_id FROM tasks WHERE instance_id = ? AND status = ? AND {ADOPTABLE}",
                [inst["instance_id"], TaskStatus.WORKING.value],
            )
            for row in rows:
                with immediate(self.db):
                    claimed = self.db.execute(
                        "UPDATE tasks SET instance_id = ?, last_updated_at = ? "
                        "WHERE task_id = ? AND instance_id = ? AND status = ?",
                        [
                            instance_id,
                            now_iso(),
                            row["task_id"],
                            inst["instance_id"],
                            TaskStatus.WORKING.value,
                        ],
                    ).rowcount
                    if claimed != 1:
                        continue
                    self.db.execute(
                        "UPDATE pending SET instance_id = ?"
                        " WHERE task_id = ? AND instance_id = ? AND status = ?",
                        [instance_id, row["task_id"], inst["instance_id"], ElicitationStatus.PENDING.value],
                    )
                adopted.append(row["task_id"])
        return adopted

    @mapped
    def reclaim(self, instance_id: str, task_ids: Collection[str], request_ids: Collection[str]) -> list[str]:
        """This live process's own calls and questions that another process settled as orphans
        (believing this one gone) become `working` / `pending` again; their ids."""
        restored: list[str] = []
        for table, key, settled, open_, ids in (
            ("tasks", "task_id", TaskStatus.INTERRUPTED, TaskStatus.WORKING, task_ids),
            ("pending", "request_id", ElicitationStatus.REJECTED, ElicitationStatus.PENDING, request_ids),
        ):
            end = "finished_at" if table == "tasks" else "answered_at"
            for row in self._rows(
                f"SELECT {key} FROM {table} WHERE instance_id = ? AND status = ? AND error LIKE ?",
                [instance_id, settled.value, ORPHANED + "%"],
            ):
                if (
                    row[key] in ids
                    and self.db.execute(
                        f"UPDATE {table} SET status = ?, error = NULL, {end} = NULL"
                        f" WHERE {key} = ? AND status = ?",
                        [open_.value, row[key], settled.value],
                    ).rowcount
                ):
                    restored.append(row[key])
        return restored


def this_instance(instance_id: str) -> InstanceRow:
    """The row that registers this process as `instance_id`."""
    at = now_iso()
    return InstanceRow(
        instance_id=instance_id,
        pid=os.getpid(),
        machine=socket.gethostname(),
        proc_start=start_tokens.start_token(os.getpid()),
        started_at=at,
        heartbeat_at=at,
        stopped_at=None,
        host_name=None,
        host_version=None,
    )


def as_instance(row: dict[str, Any]) -> InstanceRow:
    return cast(InstanceRow, row)


def orphaned(inst: InstanceRow, row: dict[str, Any], noticed: str) -> str:
    """Why a row was settled, with a time not before the row's own: a heartbeat may be older than it."""
    own = [str(row.get("created_at") or ""), str(row.get("last_updated_at") or "")]
    who = f"its emceepee process, pid {inst['pid']} on {inst['machine']},"
    if inst.get("stopped_at"):
        return f"{ORPHANED} ({who} stopped at {max([str(inst['stopped_at']), *own])})"
    seen = max([inst["heartbeat_at"], *own])
    return f"{ORPHANED} ({who} was last seen at {seen} and found gone at {noticed})"
