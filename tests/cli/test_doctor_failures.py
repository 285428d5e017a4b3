"""`doctor` on a backend that fails as a host starts it: what it wrote to stderr is shown once, and
the fix is a command line that fails the same way when pasted into the user's own shell, whose
environment is not the host's (a longer PATH, more variables) — with no secret written out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from emceepee_cli.config import ServerSpec
from emceepee_cli.config.expand import expand
from emceepee_cli.hosts.command_line import reproduce, shell_word
from tests.cli.clirun import cli
from tests.support import write_config

SECRET = "s3cret-Value-0123456789abcdef"  # in the host's env block only, never printed
# Exits 5 at start, saying what a host-started emceepee would and would not give it.
FAILS = """\
import os, sys
token = os.environ.get("TOKEN")
print("token", "given" if token and token == os.environ.get("EXPECTED") else "missing", file=sys.stderr)
print("shell-only variable", os.environ.get("ONLY_IN_THE_SHELL", "absent"), file=sys.stderr)
print("the last line", file=sys.stderr)
sys.exit(5)
"""


def _home_with_a_host(home: Path) -> Path:
    """A Claude Code config with emceepee's entry, whose env block holds the token."""
    entry = {"command": "emceepee", "args": ["serve"], "env": {"SECRET_TOKEN": SECRET}}
    path = home / ".claude.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": {"emceepee": entry}}))
    return path


def _checks(tmp_path: Path, *tables: str, **env: str) -> dict[str, dict[str, Any]]:
    config = str(write_config(tmp_path / "config.toml", *tables))
    done = cli("doctor", "--config", config, "--json", "--wait", "20", env={"HOME": str(tmp_path), **env})
    assert SECRET not in done.out + done.err
    return {check["name"]: check for check in done.json()["checks"] if check["area"] in ("backend", "config")}


def test_a_backend_that_dies_at_start_shows_its_stderr_once_and_a_line_that_fails_the_same_way(
    tmp_path: Path,
) -> None:
    _home_with_a_host(tmp_path)
    script = tmp_path / "fails.py"
    script.write_text(FAILS)
    table = (
        f"[servers.dies]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(script))}]\n"
        'env = { TOKEN = "${SECRET_TOKEN}", EXPECTED = "${SECRET_TOKEN}" }\n'
    )
    check = _checks(tmp_path, table, ONLY_IN_THE_SHELL="here")["dies"]
    assert check["state"] == "fail", check
    assert check["detail"].count("the last line") == 1, check["detail"]  # the stderr tail, once
    assert "shell-only variable absent" in check["detail"] and "token given" in check["detail"]
    fix = check["fix"]
    line = fix[fix.index("env -i ") :]
    assert 'TOKEN="${SECRET_TOKEN}"' in line and "${SECRET_TOKEN}" in fix[: fix.index("env -i ")]
    assert "ONLY_IN_THE_SHELL" not in line
    # Pasted into the user's shell (which has the token, and a variable the host does not give):
    shell = {**os.environ, "SECRET_TOKEN": SECRET, "ONLY_IN_THE_SHELL": "here"}
    again = subprocess.run(["bash", "-c", line], env=shell, capture_output=True, text=True, timeout=60)
    assert again.returncode == 5, again
    assert "shell-only variable absent" in again.stderr and "token given" in again.stderr


def test_a_variable_set_only_in_the_shell_points_at_the_hosts_env_block(tmp_path: Path) -> None:
    host_file = _home_with_a_host(tmp_path)
    table = '[servers.needs]\ncommand = "python3"\nenv = { KEY = "${ONLY_IN_THE_SHELL}" }\n'
    check = _checks(tmp_path, table, ONLY_IN_THE_SHELL="here")["needs"]
    assert check["state"] == "fail" and "it is set in this shell, not for the host" in check["detail"]
    assert '"ONLY_IN_THE_SHELL"' in check["fix"] and '"env" block' in check["fix"]
    assert str(host_file) in check["fix"] and "Claude Code" in check["fix"]


def test_a_variable_set_nowhere_points_at_the_hosts_env_block_too(tmp_path: Path) -> None:
    host_file = _home_with_a_host(tmp_path)
    table = '[servers.needs]\ncommand = "python3"\nenv = { KEY = "${SET_NOWHERE_AT_ALL}" }\n'
    checks = _checks(tmp_path, table)
    fix = next(c["fix"] for c in checks.values() if "SET_NOWHERE_AT_ALL" in c["detail"])
    assert '"SET_NOWHERE_AT_ALL"' in fix and str(host_file) in fix and "edit" not in fix


HOSTILE_VALUES = [
    "plain",
    "",
    "it's a 'quote' and a \"double\"",
    "$(touch /tmp/emceepee-pwned) `touch /tmp/emceepee-pwned` $HOME $ {",
    "a ${GREETING} b ${GREETING}c",
    "$${NOT_A_REF} and ${GREETING}",
    "new\nline\ttab",
    "~/not-at-the-start-~",
    "--flag=${GREETING}",
]


def test_a_config_value_becomes_one_shell_word_that_the_shell_expands_as_emceepee_does() -> None:
    environ = {"GREETING": "hi there; $(not run)", "PATH": os.environ["PATH"]}
    for value in HOSTILE_VALUES:
        word = shell_word(value)
        said = subprocess.run(
            ["bash", "-c", f"printf %s {word}"], env=environ, capture_output=True, text=True, timeout=30
        )
        assert said.stdout == expand("value", value, environ), (value, word)
    assert not Path("/tmp/emceepee-pwned").exists()


def test_the_line_keeps_secrets_out_and_reads_them_from_the_shell() -> None:
    spec = ServerSpec(
        "s",
        command="~/bin/server",
        args=("--token=${API_TOKEN}", "it's"),
        env={"API_KEY": "sk-live-0123456789abcdefABCDEF", "MODE": "fast ${MODE_SUFFIX}"},
        cwd="~/work dir",
    )
    made = reproduce(
        spec, {"PATH": "/usr/bin:/bin", "HOME": "/home/u", "GITHUB_TOKEN": "ghp_notpassed0123456789"}
    )
    home = os.path.expanduser("~")
    assert made.line == (
        f"cd '{home}/work dir' && env -i HOME=/home/u PATH=/usr/bin:/bin "
        'API_KEY="${API_KEY}" MODE=\'fast \'"${MODE_SUFFIX}" '
        f"{home}/bin/server --token=\"${{API_TOKEN}}\" 'it'\"'\"'s'"
    )
    assert "sk-live" not in made.line and "ghp_" not in made.line  # a host variable no backend gets
    assert made.reads == ("API_TOKEN", "MODE_SUFFIX", "API_KEY")
