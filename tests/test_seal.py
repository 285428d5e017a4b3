"""The install key: made once (0600), whole even when made by several processes at once, and a key
file that cannot be used (or written) is a clear error."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

import pytest

from emceepee_cli import seal
from tests.support import as_task_row


@pytest.mark.parametrize(
    ("content", "why"),
    [("not hex at all", "non-hexadecimal"), ("abcd", "2 bytes, not 32"), ("", "0 bytes, not 32")],
)
def test_a_key_file_that_is_not_a_key_is_refused_with_what_to_do(
    tmp_path: Path, content: str, why: str
) -> None:
    (tmp_path / seal.KEY_FILE).write_text(content)
    with pytest.raises(seal.InstallKeyError) as refused:
        seal.install_key(tmp_path)
    assert why in refused.value.message and "Delete it" in str(refused.value.hint)
    assert (tmp_path / seal.KEY_FILE).read_text() == content  # left as it was: the user decides


def test_a_key_where_no_folder_can_be_made_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data").write_text("a file, not a folder")
    with pytest.raises(seal.InstallKeyError):
        seal.install_key(tmp_path / "data" / "inner")


def test_processes_making_the_key_at_once_all_get_the_one_that_was_written_whole(tmp_path: Path) -> None:
    start = threading.Barrier(8)
    keys: list[bytes] = []

    def make() -> None:
        start.wait(10)
        keys.append(seal.install_key(tmp_path))

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(keys) == 8 and len(set(keys)) == 1
    assert seal.read_key(tmp_path / seal.KEY_FILE) == keys[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [seal.KEY_FILE]  # no draft left behind


def test_a_key_that_cannot_be_written_whole_is_an_error_and_leaves_no_empty_key(tmp_path: Path) -> None:
    script = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from emceepee_cli import seal\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (10, 10))  # a disk that fills after 10 bytes\n"
        "try:\n"
        "    seal.install_key(Path(sys.argv[1]))\n"
        "except seal.InstallKeyError as exc:\n"
        "    print(exc.message)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert "cannot be used" in done.stdout, done.stderr
    assert list(tmp_path.iterdir()) == []  # the next start makes a good key instead of refusing an empty one
    assert len(seal.install_key(tmp_path)) == seal.KEY_BYTES


def test_a_tasks_resume_token_comes_from_its_row_alone(tmp_path: Path) -> None:
    key = seal.install_key(tmp_path)
    row = as_task_row(
        {
            "task_id": "01TASK",
            "status": "working",
            "server": "s",
            "tool": "t",
            "args": '{"a": 1}',
            "created_at": "2026-11-23T04:00:00.000Z",
            "expires_at": None,  # a working task always has one; without it, an hour after it began
        }
    )
    begun = datetime.fromisoformat("2026-11-23T04:00:00+00:00").timestamp()
    token = seal.task_resume_token(key, row, retention_s=60)
    assert token == seal.sign_resume(key, "01TASK", "s", "t", {"a": 1}, begun + 3600 + 60)
    assert seal.task_resume_token(key, {**row, "status": "completed"}, 60) is None
