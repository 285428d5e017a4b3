"""`emceepee servers add/remove` under concurrency and with hostile names, as real processes."""

from __future__ import annotations

import fcntl
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from emceepee_cli import locking
from emceepee_cli.config import ServerSpec, add_server, load_config
from emceepee_cli.errors import ConfigError
from tests.support import run_cli, write_config


def test_twenty_concurrent_adds_all_end_up_in_the_config(emceepee_home: Path) -> None:
    names = [f"s{i}" for i in range(20)]
    with ThreadPoolExecutor(len(names)) as pool:
        done = list(pool.map(lambda name: run_cli("servers", "add", name, "--", "cmd", name), names))
    assert all(d.returncode == 0 for d in done), [d.stderr for d in done if d.returncode]
    config = load_config(emceepee_home / "config.toml")
    assert sorted(config.servers) == sorted(names) and config.problems == ()
    assert {spec.args for spec in config.servers.values()} == {(name,) for name in names}


def test_concurrent_adds_and_removes_keep_exactly_the_survivors(emceepee_home: Path) -> None:
    emceepee_home.mkdir()
    config = write_config(
        emceepee_home / "config.toml", *(f'[servers.{n}]\ncommand = "cmd"\n' for n in "abc")
    )
    jobs = [("remove", "a"), ("remove", "b"), ("add", "d"), ("add", "e"), ("add", "f")]
    with ThreadPoolExecutor(len(jobs)) as pool:
        done = list(
            pool.map(lambda job: run_cli("servers", *job, *(["--", "cmd"] if job[0] == "add" else [])), jobs)
        )
    assert all(d.returncode == 0 for d in done), [d.stderr for d in done if d.returncode]
    assert sorted(load_config(config).servers) == ["c", "d", "e", "f"]


def test_a_lock_held_too_long_is_a_clear_error_and_nothing_is_written(
    emceepee_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = add_server(ServerSpec("a", command="cmd"))
    before = path.read_text()
    monkeypatch.setattr(locking, "LOCK_WAIT_S", 0.3)
    fd = os.open(locking.lock_path(path), os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a stuck writer
    try:
        started = time.monotonic()
        with pytest.raises(ConfigError) as caught:
            add_server(ServerSpec("b", command="cmd"))
        waited = time.monotonic() - started
    finally:
        os.close(fd)
    assert "is being edited by another process" in caught.value.message
    assert "config.toml.lock" in caught.value.message and caught.value.hint
    assert 0.3 <= waited < 5
    assert path.read_text() == before
    add_server(ServerSpec("b", command="cmd"))  # released: the next writer gets in
    assert sorted(load_config(path).servers) == ["a", "b"]


def test_a_name_ending_in_a_newline_is_refused(emceepee_home: Path) -> None:
    done = run_cli("servers", "add", "abc\n", "--", "cmd")
    assert done.returncode == 2, done.stderr
    assert "server 'abc\\n': bad name" in done.stderr and "Traceback" not in done.stderr
    assert not (emceepee_home / "config.toml").exists()
    emceepee_home.mkdir()
    hand_written = emceepee_home / "config.toml"
    hand_written.write_text('[servers."abc\\n"]\ncommand = "cmd"\n')
    config = load_config(hand_written)
    assert config.servers == {} and [p.server for p in config.problems] == ["abc\n"]
