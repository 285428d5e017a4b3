"""A task's result kept as the bytes the host gets: written once, read back whole, read as JSON too."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

from emceepee_cli.calls.call import outcome
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import TaskStatus
from tests.store.test_journal import task_row
from tests.support import text_of


class Body:
    """A result's bytes in pieces, as calls/spool.Held gives them."""

    def __init__(self, data: bytes, piece: int) -> None:
        self.data, self.piece, self.size = data, piece, len(data)

    def chunks(self) -> Iterator[bytes]:
        for at in range(0, self.size, self.piece):
            yield self.data[at : at + self.piece]


def test_a_kept_result_reads_back_whole_and_as_the_json_every_reader_takes(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.db")
    data = b'{"content":[{"text":"' + b"x" * 3_000_000 + ', é","type":"text"}],"isError":false}'.encode()
    journal.db.table("tasks").insert(dict(task_row("T1", "I1")))
    assert journal.tasks.finish("T1", TaskStatus.COMPLETED, body=Body(data, 1_000_003))
    assert not journal.tasks.finish("T1", TaskStatus.COMPLETED, body=Body(data, 7))  # first writer wins
    assert journal.results.kept_size("T1") == len(data)
    sink = io.BytesIO()
    assert journal.results.read_kept("T1", sink) == len(data)
    assert sink.getvalue() == data
    light, whole = journal.tasks.row("T1", whole=False), journal.tasks.row("T1")
    assert light is not None and light["result"] is None and light["status"] == "completed"
    assert whole is not None and whole["result"] == data
    shown = outcome(whole)  # what `emceepee tasks show` and a slow-path reply read
    assert not isinstance(shown, dict) and text_of(shown.content[0]).endswith("x, é")
    journal.db.table("tasks").insert(dict(task_row("T2", "I1")))
    assert journal.tasks.finish("T2", TaskStatus.COMPLETED, result={"content": []})
    assert journal.results.kept_size("T2") is None  # a result written as JSON text is not kept bytes
    assert journal.results.read_kept("T2", io.BytesIO()) == 0
