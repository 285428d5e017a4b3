"""How one call ended: `CallEnd`, one value of five shapes, set once on the `Call` (calls/call.py).

    Returned      the backend's result, as a model (the chain's last, with its blocks)
    ReturnedRaw   a result taken raw by the fast lane (calls/raw_step.py): the host's bytes, held
                  within the result budget (calls/spool.py) until delivered, journaled or read
    KeptRaw       such bytes handed to the journal (store/tables/results.py) and no longer held
    Failed        an error: the backend's, or emceepee's on its way
    Stopped       cancelled, expired or interrupted, saying why

A raw result may later change its form, never what it says: into a model (`Call.reform` with
`Returned`, when it is kept in memory) or into `KeptRaw` (once journaled). `status` is the task
status an end is journaled with, `error` the message a task that did not complete keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import mcp_types as types

from emceepee_cli.calls.spool import Held
from emceepee_cli.errors import EmceepeeError
from emceepee_cli.store.records import TaskStatus


@dataclass(frozen=True)
class Returned:
    """The backend's result, as a model."""

    result: types.CallToolResult
    status: ClassVar[TaskStatus] = TaskStatus.COMPLETED
    error: ClassVar[None] = None


@dataclass(frozen=True)
class ReturnedRaw:
    """A result of the plain shape as the bytes the host gets (calls/raw_step.py); `preview` is
    its first text cut short, as its step shows it (`Step.text`)."""

    body: Held
    preview: str
    status: ClassVar[TaskStatus] = TaskStatus.COMPLETED
    error: ClassVar[None] = None


@dataclass(frozen=True)
class KeptRaw:
    """A raw result whose bytes went to the journal (store/tables/results.py; or the journal already held
    another end of the task, written first) and are no longer held: it is read back from there."""

    preview: str
    status: ClassVar[TaskStatus] = TaskStatus.COMPLETED
    error: ClassVar[None] = None


@dataclass(frozen=True)
class Failed:
    """The call failed: the backend's error, or emceepee's on the way to it."""

    error: EmceepeeError
    status: ClassVar[TaskStatus] = TaskStatus.FAILED


STOPPED = (TaskStatus.CANCELLED, TaskStatus.EXPIRED, TaskStatus.INTERRUPTED)


@dataclass(frozen=True)
class Stopped:
    """The call was stopped before it ended: cancelled (by the host or cancel_task), expired (its
    TTL), or interrupted (emceepee stopped); `error` says so to whoever asks for its result."""

    status: TaskStatus
    error: EmceepeeError

    def __post_init__(self) -> None:
        if self.status not in STOPPED:
            raise ValueError(f"{self.status} is not how a call is stopped (one of {[*STOPPED]})")


CallEnd = Returned | ReturnedRaw | KeptRaw | Failed | Stopped


def preview(end: CallEnd | None) -> str | None:
    """A raw result's first text (its step row keeps that instead of the result, calls/steps.py)."""
    return end.preview if isinstance(end, ReturnedRaw | KeptRaw) else None
