"""`emceepee servers …` and `--version`, run as real processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from emceepee_cli import __version__
from emceepee_cli.config import load_config
from tests.support import run_cli


def test_version_prints_the_package_version() -> None:
    done = run_cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"emceepee {__version__}"


def test_servers_add_list_remove_round_trip_through_the_config(
    emceepee_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_TOKEN", "t")
    monkeypatch.setenv("API", "a")
    added = run_cli(
        "servers",
        "add",
        "git",
        "--env",
        "TOKEN=${GIT_TOKEN}",
        "--",
        "uvx",
        "mcp-server-git",
        "--repository",
        "~/src",
    )
    remote = run_cli(
        "servers", "add", "remote", "--url", "https://example.com/mcp", "-H", "Authorization=Bearer ${API}"
    )
    listed = json.loads(run_cli("servers", "list", "--json").stdout)
    removed = run_cli("servers", "remove", "git")
    assert added.returncode == 0 and remote.returncode == 0, added.stderr + remote.stderr
    config = emceepee_home / "config.toml"
    assert listed["config"] == str(config)
    assert listed["servers"] == [
        {
            "name": "git",
            "transport": "stdio",
            "enabled": True,
            "protocol": "legacy",
            "status": "enabled",
            "command": "uvx",
            "args": ["mcp-server-git", "--repository", "~/src"],
        },
        {
            "name": "remote",
            "transport": "http",
            "enabled": True,
            "protocol": "legacy",
            "status": "enabled",
            "url": "https://example.com/mcp",
        },
    ]
    assert removed.returncode == 0
    left = load_config(config).servers
    assert list(left) == ["remote"] and left["remote"].headers == {"Authorization": "Bearer ${API}"}
    assert "${GIT_TOKEN}" not in config.read_text()  # removed with its server; never expanded into the file


def test_removing_an_unknown_server_fails_with_the_known_names(emceepee_home: Path) -> None:
    run_cli("servers", "add", "fs", "--", "npx", "server-fs")
    done = run_cli("servers", "remove", "gh")
    assert done.returncode == 2
    assert "Unknown server 'gh'" in done.stderr and "fs" in done.stderr
    assert "Traceback" not in done.stderr


def test_add_needs_exactly_one_of_command_or_url() -> None:
    done = run_cli("servers", "add", "x")
    assert done.returncode == 2 and "either a command after `--` or --url" in done.stderr


def test_servers_list_reports_a_config_syntax_error_with_its_line(emceepee_home: Path) -> None:
    emceepee_home.mkdir(parents=True, exist_ok=True)
    (emceepee_home / "config.toml").write_text('[servers.a]\ncommand = "x"\nargs = [\n')
    done = run_cli("servers", "list")
    assert done.returncode == 2
    assert "config.toml" in done.stderr and "line" in done.stderr
