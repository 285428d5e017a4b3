"""`emceepee doctor` with a good, a broken and a PATH-only backend, started as a host starts them."""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from pathlib import Path

import pytest

from emceepee_cli import paths, seal
from emceepee_cli.hosts import catalog
from tests.cli.clirun import cli
from tests.support import EXAMPLES, example_table, write_config

BROKEN = "import sys; sys.stderr.write('boom: no API key given\\n'); sys.exit(3)"


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with no host installed; a host's PATH without the folder this shell adds to its own."""
    home, shell_bin = tmp_path / "home", tmp_path / "shell-bin"
    home.mkdir()
    shell_bin.mkdir()
    script = shell_bin / "pathonly-mcp"
    script.write_text(
        f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLES / 'echo.py'))}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("EMCEEPEE_HOST_PATH", "/usr/bin:/bin")
    monkeypatch.setenv("PATH", f"{shell_bin}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def lines_of(out: str, prefix: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(prefix)]


def test_doctor_passes_the_good_fails_the_broken_and_the_path_only_with_their_fixes(setup: Path) -> None:
    config = write_config(
        setup / "config.toml",
        example_table("good", "echo.py"),
        f"[servers.broken]\ncommand = {json.dumps(sys.executable)}\nargs = ['-c', {json.dumps(BROKEN)}]\n",
        '[servers.pathonly]\ncommand = "pathonly-mcp"\n',
    )
    done = cli("doctor", "--config", str(config))
    assert done.code == 1
    assert "ok    backend  good: started as a host would: handshake ok, 6 tool(s)" in done.out
    [broken] = lines_of(done.out, "FAIL  backend  broken")
    assert "exited during start-up (exit code 3" in broken and "boom: no API key given" in done.out
    [path_only] = lines_of(done.out, "FAIL  backend  pathonly")
    assert "only on this shell's PATH" in path_only and "/usr/bin:/bin" in path_only
    script = setup / "shell-bin" / "pathonly-mcp"
    fix = f"fix: emceepee servers add pathonly --replace --config {config} -- {script}"
    assert fix in done.out
    assert len(lines_of(done.out, "note  host")) == len(catalog.HOSTS)  # not installed: notes, not failures
    assert "2 check(s) failed." in done.out

    fixed = cli(*shlex.split(fix.removeprefix("fix: emceepee ")))
    cli("servers", "remove", "broken", "--config", str(config))
    again = cli("doctor", "--config", str(config), "--json")
    assert fixed.code == 0 and again.code == 0, again.out
    checks = {(c["area"], c["name"]): c for c in again.json()["checks"]}
    assert checks["backend", "pathonly"]["state"] == "ok" and again.json()["ok"] is True


def test_a_variable_set_only_in_this_shell_fails_until_the_hosts_entry_sets_it(
    setup: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOC_TOKEN", "s3cret-value-123")
    config = write_config(setup / "config.toml", example_table("needs", "echo.py", env={"T": "${DOC_TOKEN}"}))
    before = cli("doctor", "--config", str(config), "--json")
    check = next(c for c in before.json()["checks"] if c["name"] == "needs")
    assert before.code == 1 and check["state"] == "fail"
    assert (
        "${DOC_TOKEN} is not set" in check["detail"]
        and "set in this shell, not for the host" in check["detail"]
    )

    cli("install", "cursor", "--config", str(config))
    path = catalog.HOSTS["cursor"].path()
    doc = json.loads(path.read_text())
    doc["mcpServers"]["emceepee"]["env"] = {"DOC_TOKEN": "s3cret-value-123"}
    path.write_text(json.dumps(doc))
    after = cli("doctor", "--config", str(config), "--json")
    checks = {c["name"]: c for c in after.json()["checks"]}
    assert after.code == 0, after.out
    assert checks["needs"]["state"] == "ok" and checks["Cursor"]["state"] == "ok"
    assert "s3cret" not in after.out


def test_a_journal_that_is_not_sqlite_fails_with_the_command_that_moves_it_aside(setup: Path) -> None:
    db = setup / "journal.db"
    db.write_bytes(b"not a database at all" * 100)
    done = cli("doctor", "--config", str(setup / "none.toml"), "--db", str(db), "--json")
    checks = {c["area"]: c for c in done.json()["checks"]}
    assert done.code == 1
    assert checks["journal"]["state"] == "fail" and checks["journal"]["fix"].startswith(f"mv {db} ")
    assert checks["config"]["state"] == "note"  # no config file is no backends, not a failure


def test_an_install_key_others_can_read_or_that_is_no_key_fails_with_its_fix(setup: Path) -> None:
    key = paths.data_dir() / seal.KEY_FILE
    none = cli("doctor", "--config", str(setup / "none.toml"), "--json").json()["checks"]
    seal.install_key()
    made = cli("doctor", "--config", str(setup / "none.toml"), "--json").json()["checks"]
    key.chmod(0o644)
    shared = cli("doctor", "--config", str(setup / "none.toml"), "--json")
    key.write_text("not a key")
    broken = cli("doctor", "--config", str(setup / "none.toml"), "--json")

    def checked(checks: list[dict[str, str]]) -> dict[str, str]:
        return next(c for c in checks if c["area"] == "key")

    assert checked(none)["state"] == "note" and checked(made)["state"] == "ok"
    assert shared.code == 1 and checked(shared.json()["checks"])["fix"] == f"chmod 600 {key}"
    assert "readable by others (mode 0o644)" in checked(shared.json()["checks"])["detail"]
    assert broken.code == 1 and checked(broken.json()["checks"])["fix"].startswith(f"rm {key} ")
