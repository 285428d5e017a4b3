"""A `${VAR}` this shell lacks is taken from the "env" block of emceepee's entry in the hosts' files
(where `import --replace` moves secrets) by `servers list/show`, `tools` and `call`: the file is
named, the value never printed. `tools` lists the servers it cannot start, with the reason."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from emceepee_cli.hosts import catalog
from tests.cli.clirun import Ran, cli
from tests.support import EXAMPLES, HOSTILE, example_table, write_config

TOKEN = "ghp_0123456789abcdefghijKLMN"


@pytest.fixture(autouse=True)
def no_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shell has none of the variables the hosts' files are to give (tests/conftest.py's home)."""
    for name in ("GITHUB_TOKEN", "GITHUB_PERSONAL_ACCESS_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def config(emceepee_home: Path) -> Path:
    emceepee_home.mkdir()
    return emceepee_home / "config.toml"


def host_file(key: str, servers: dict[str, Any]) -> Path:
    path = catalog.HOSTS[key].path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({catalog.HOSTS[key].servers_key: servers}))
    return path


def emceepee_entry(env: dict[str, Any]) -> dict[str, Any]:
    return {"command": "emceepee", "args": ["serve"], "env": env}


def said(*runs: Ran) -> str:
    return "".join(run.out + run.err for run in runs)


def test_servers_moved_by_import_replace_are_listed_shown_listed_and_called_from_a_terminal(
    config: Path,
) -> None:
    cursor = host_file(
        "cursor",
        {
            "github": {
                "command": sys.executable,
                "args": [str(EXAMPLES / "echo.py")],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": TOKEN},
            }
        },
    )
    moved = cli("import", "cursor", "--replace")
    listed, as_json = cli("servers", "list"), cli("servers", "list", "--json")
    shown = cli("servers", "show", "github", "--json")
    tools, called = cli("tools", "github"), cli("call", "github", "add", "a=2", "b=3")
    assert moved.code == 0 and "${GITHUB_PERSONAL_ACCESS_TOKEN}" in config.read_text()
    assert listed.code == 0 and "github  enabled" in listed.out
    named = '${GITHUB_PERSONAL_ACCESS_TOKEN} is not set in this shell: using the value in the "env" block'
    assert all(named in run.err and str(cursor) in run.err for run in (listed, shown, tools, called))
    assert as_json.json()["variables_from_hosts"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": str(cursor)}
    server = shown.json()["server"]
    assert server["status"] == "enabled" and "problems" not in server
    assert server["variables_from_hosts"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": str(cursor)}
    assert tools.code == 0 and "github  add" in tools.out
    assert called.code == 0 and called.out.startswith("5\n")
    assert TOKEN not in said(moved, listed, as_json, shown, tools, called)


def test_the_backend_gets_the_hosts_value_and_what_it_prints_of_it_reads_as_the_reference(
    config: Path,
) -> None:
    host_file("claude-desktop", {"emceepee": emceepee_entry({"GITHUB_TOKEN": TOKEN})})
    write_config(
        config,
        f"[servers.github]\ncommand = {json.dumps(sys.executable)}\n"
        f"args = {json.dumps([str(HOSTILE), '--say-env', 'TOKEN', '--exit-at-start', '3'])}\n"
        'env = { TOKEN = "${GITHUB_TOKEN}" }\n',
    )
    tools, called = cli("tools", "github"), cli("call", "github", "echo", "text=hi")
    assert tools.code == called.code == 3
    assert "TOKEN=${GITHUB_TOKEN}" in tools.out and "TOKEN=${GITHUB_TOKEN}" in called.err  # it was set
    assert TOKEN not in said(tools, called)


def test_a_variable_set_in_this_shell_wins_and_no_host_file_is_named(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    host_file("cursor", {"emceepee": emceepee_entry({"GITHUB_TOKEN": "from-the-host-file-123"})})
    write_config(config, '[servers.gh]\ncommand = "cmd"\nenv = { T = "${GITHUB_TOKEN}" }\n')
    monkeypatch.setenv("GITHUB_TOKEN", "from-this-shell-456")
    listed = cli("servers", "list", "--json")
    assert listed.json()["variables_from_hosts"] == {} and listed.err == ""
    assert listed.json()["servers"][0]["status"] == "enabled"


def test_where_two_hosts_set_a_variable_the_later_one_is_used_and_named_as_doctor_does(
    config: Path,
) -> None:
    host_file("claude-desktop", {"emceepee": emceepee_entry({"GITHUB_TOKEN": "first-value-123"})})
    cursor = host_file("cursor", {"emceepee": emceepee_entry({"GITHUB_TOKEN": TOKEN})})
    write_config(config, '[servers.gh]\ncommand = "cmd"\nenv = { T = "${GITHUB_TOKEN}" }\n')
    assert cli("servers", "list", "--json").json()["variables_from_hosts"] == {"GITHUB_TOKEN": str(cursor)}


def test_tools_lists_the_servers_it_cannot_start_with_the_reason(config: Path) -> None:
    write_config(
        config,
        example_table("echo", "echo.py"),
        '[servers.unset]\ncommand = "cmd"\nenv = { T = "${NOT_SET_ANYWHERE}" }\n'
        '[servers.odd]\ncommand = "cmd"\nenv = { T = "${GITHUB-TOKEN}" }\n'
        '[servers.off]\ncommand = "cmd"\nenabled = false\nbogus = 1\n',
    )
    host_file("cursor", {"emceepee": emceepee_entry({"GITHUB-TOKEN": TOKEN})})
    done, as_json = cli("tools"), cli("tools", "--json")
    rows = {line.split()[0]: line for line in done.out.splitlines()[1:]}
    assert done.code == 0 and "echo" in rows and "off" not in rows
    assert "(invalid)" in rows["unset"] and "${NOT_SET_ANYWHERE} is not set" in rows["unset"]
    assert "(invalid)" in rows["odd"] and "is not a valid variable reference" in rows["odd"]
    groups = {group["server"]: group for group in as_json.json()["servers"]}
    assert groups["unset"]["status"] == "invalid" and "NOT_SET_ANYWHERE" in groups["unset"]["error"]
    assert set(groups) == {"echo", "unset", "odd"} and TOKEN not in said(done, as_json)


def test_a_host_file_that_is_not_json_is_passed_over_with_the_reason_and_left_alone(config: Path) -> None:
    broken = catalog.HOSTS["claude-desktop"].path()
    broken.parent.mkdir(parents=True)
    broken.write_text('{"mcpServers": {"emceepee": {"env": {"GITHUB_TOKEN": "x"')
    cursor = host_file("cursor", {"emceepee": emceepee_entry({"GITHUB_TOKEN": TOKEN})})
    before = broken.read_text(), cursor.read_text()
    write_config(config, '[servers.gh]\ncommand = "cmd"\nenv = { T = "${GITHUB_TOKEN}" }\n')
    listed = cli("servers", "list")
    assert listed.code == 0 and "gh    enabled" in listed.out
    assert (
        f"{broken} is not valid JSON" in listed.err
        and 'Its "env" block for emceepee was not read' in listed.err
    )
    assert str(cursor) in listed.err and (broken.read_text(), cursor.read_text()) == before
    assert TOKEN not in said(listed)


def test_a_huge_env_block_with_values_no_process_can_take_is_read_and_those_values_are_not_used(
    config: Path,
) -> None:
    env: dict[str, Any] = {f"K{i}": f"value-{i}" for i in range(20_000)}
    env |= {"BIG": "x" * 1_000_000, "WITH_NUL": "a\u0000b", "NUMBER": 5, "": "empty", "A=B": "c"}
    env["GITHUB_TOKEN"] = TOKEN
    host_file("cursor", {"emceepee": emceepee_entry(env)})
    write_config(
        config,
        '[servers.gh]\ncommand = "cmd"\nenv = { T = "${GITHUB_TOKEN}", K = "${K19999}" }\n'
        '[servers.nul]\ncommand = "cmd"\nenv = { T = "${WITH_NUL}" }\n'
        '[servers.number]\ncommand = "cmd"\nenv = { T = "${NUMBER}" }\n',
    )
    listed = cli("servers", "list", "--json")
    status = {row["name"]: row["status"] for row in listed.json()["servers"]}
    assert listed.code == 0 and status == {"gh": "enabled", "nul": "invalid", "number": "invalid"}
    assert set(listed.json()["variables_from_hosts"]) == {"GITHUB_TOKEN", "K19999"}
    assert TOKEN not in said(listed) and "xxxxxxxxxx" not in said(listed)
