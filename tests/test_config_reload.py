"""Which servers a config reload starts, stops and restarts (config/reload.py)."""

from __future__ import annotations

from pathlib import Path

from emceepee_cli.config import ServerSpec, add_server, load_config
from emceepee_cli.config.reload import emptying, plan, signature


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_only_what_changed_is_touched(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", '[servers.a]\ncommand = "a"\n[servers.b]\ncommand = "b"\n')
    loaded = load_config(path)
    running = {**loaded.servers, "adhoc": ServerSpec("adhoc", command="x")}  # add_server(persist=false)
    write(path, '[servers.a]\ncommand = "a"\n[servers.c]\ncommand = "c"\n[defaults]\ntimeout_ms = 5\n')
    done = plan(running, loaded, load_config(path))
    assert [s.name for s in done.start] == ["c"] and done.stop == ("b",) and done.restart == ()
    assert done.defaults_changed and not done.kept


def test_a_changed_or_disabled_table_restarts_and_a_broken_one_keeps_running(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", '[servers.a]\ncommand = "a"\n[servers.b]\ncommand = "b"\n')
    loaded = load_config(path)
    write(path, '[servers.a]\ncommand = "a"\nenabled = false\n[servers.b]\ncommand = ["b"]\n')
    done = plan(loaded.servers, loaded, load_config(path))
    assert [s.name for s in done.restart] == ["a"] and not done.restart[0].enabled
    assert done.stop == () and set(done.kept) == {"b"}
    assert "field 'command': must be a string" in done.kept["b"]
    assert done.summary()["kept_running"] == done.kept


def test_a_server_saved_by_serve_itself_is_not_restarted_when_the_file_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    spec = ServerSpec("s", command="x", args=("-v",), env={"T": "${T}"}, sampling="park")
    add_server(spec, path)
    assert plan({"s": spec}, load_config(tmp_path / "none.toml"), load_config(path)).empty


def test_the_signature_changes_with_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    assert signature(path) is None
    write(path, "a")
    first = signature(path)
    write(path, "ab")
    assert first is not None and signature(path) != first


def test_a_file_that_names_no_server_empties_only_if_it_would_stop_some(tmp_path: Path) -> None:
    path = write(tmp_path / "config.toml", '[servers.a]\ncommand = "a"\n')
    loaded = load_config(path)
    adhoc = {"adhoc": ServerSpec("adhoc", command="x")}  # add_server(persist=false): not the file's
    for text in ("", "[defaults]\ntimeout_ms = 5\n"):
        new = load_config(write(path, text))
        assert emptying(plan({**loaded.servers, **adhoc}, loaded, new), new), text
    cut = load_config(write(path, "[servers.a]\n"))  # a table cut short keeps its server running
    assert not emptying(plan(loaded.servers, loaded, cut), cut)
    gone = load_config(tmp_path / "gone.toml")
    assert emptying(plan(loaded.servers, loaded, gone), gone)
    assert not emptying(plan(adhoc, loaded, gone), gone)  # a's already gone: nothing would stop
    renamed = load_config(write(path, '[servers.b]\ncommand = "a"\n'))
    assert not emptying(plan(loaded.servers, loaded, renamed), renamed)
