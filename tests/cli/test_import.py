"""`emceepee import HOST` on a temporary home folder, for every host: servers copied (an SSE one with
transport = "sse"), secrets kept as ${VAR} (their values moved to emceepee's own entry, never
printed), skips explained, --replace."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from emceepee_cli.config import load_config
from emceepee_cli.hosts import catalog
from tests.cli.clirun import cli, example_line

TOKEN = "ghp_0123456789abcdefghijKLMN"
BEARER = "Bearer sk-live-0123456789abcdef"


def remote(host: catalog.Host) -> dict[str, Any]:
    entry: dict[str, Any] = {
        host.url_key: "https://api.example.com/mcp",
        "headers": {"Authorization": BEARER},
    }
    return {"type": "http", **entry} if host.typed else entry


def write_host(host: catalog.Host) -> Path:
    path = host.path()
    path.parent.mkdir(parents=True, exist_ok=True)
    servers = {
        "github": {
            "command": "npx",
            "args": ["-y", "server-github"],
            "env": {"GITHUB_TOKEN": TOKEN, "DEBUG": "1"},
        },
        "remote": remote(host),
        "legacy-sse": {"type": "sse", "url": "https://old.example.com/sse"},
        "emceepee": {"command": "/somewhere/emceepee", "args": ["serve"]},
        "echo": {"command": "python3", "args": ["echo.py"]},
    }
    path.write_text(json.dumps({"keep": True, host.servers_key: servers}))
    return path


@pytest.mark.parametrize("key", list(catalog.HOSTS))
def test_import_copies_servers_and_keeps_secrets_out_of_the_config_and_the_output(
    key: str, emceepee_home: Path
) -> None:
    host = catalog.HOSTS[key]
    path = write_host(host)
    cli(*example_line("echo", "echo.py"))
    done = cli("import", key)
    config = emceepee_home / "config.toml"
    servers = tomllib.loads(config.read_text())[
        "servers"
    ]  # as written: the ${VAR}s are set only for the host
    assert done.code == 0, done.err
    assert servers["github"] == {
        "command": "npx",
        "args": ["-y", "server-github"],
        "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "DEBUG": "1"},
    }
    assert servers["remote"] == {
        "url": "https://api.example.com/mcp",
        "headers": {"Authorization": "${REMOTE_AUTHORIZATION}"},
    }
    assert servers["legacy-sse"] == {"url": "https://old.example.com/sse", "transport": "sse"}
    assert set(servers) == {"echo", "github", "remote", "legacy-sse"}
    text = config.read_text() + done.out + done.err
    assert TOKEN not in text and "sk-live" not in text
    ours = json.loads(path.read_text())[host.servers_key]["emceepee"]
    assert ours["env"] == {"GITHUB_TOKEN": TOKEN, "REMOTE_AUTHORIZATION": BEARER}
    assert "already in emceepee's config" in done.out and "emceepee itself" in done.out


def test_import_twice_copies_nothing_the_second_time(emceepee_home: Path) -> None:
    write_host(catalog.HOSTS["cursor"])
    cli("import", "cursor")
    config = (emceepee_home / "config.toml").read_text()
    again = cli("import", "cursor", "--json")
    assert again.code == 0 and again.json()["moved"] == [] and not again.json()["host_file"]["changed"]
    assert (emceepee_home / "config.toml").read_text() == config


def test_replace_leaves_only_emceepee_and_what_could_not_move_after_a_backup() -> None:
    host = catalog.HOSTS["claude-desktop"]
    path = write_host(host)
    before = path.read_text()
    done = cli("import", "claude", "--replace")
    doc = json.loads(path.read_text())
    assert done.code == 0 and doc["keep"] is True
    assert set(doc[host.servers_key]) == {"emceepee"}
    assert doc[host.servers_key]["emceepee"]["args"] == ["serve"]
    assert [p.read_text() for p in path.parent.glob(path.name + ".*.bak")] == [before]
    assert "removed github, remote, legacy-sse, echo" in done.out


def test_dry_run_changes_neither_file(emceepee_home: Path) -> None:
    path = write_host(catalog.HOSTS["windsurf"])
    before = path.read_text()
    done = cli("import", "windsurf", "--replace", "--dry-run")
    assert done.code == 0 and path.read_text() == before
    assert not (emceepee_home / "config.toml").exists()
    assert "Would copy" in done.out and TOKEN not in done.out


def test_a_host_without_a_config_has_nothing_to_import() -> None:
    done = cli("import", "gemini-cli")
    assert done.code == 2 and "does not exist" in done.err and "--file" in done.err


def test_vs_code_inputs_and_env_references_are_understood(emceepee_home: Path) -> None:
    host = catalog.HOSTS["vscode"]
    path = host.path()
    path.parent.mkdir(parents=True)
    servers = {
        "asks": {"type": "stdio", "command": "x", "env": {"KEY": "${input:api-key}"}},
        "refers": {"type": "stdio", "command": "y", "env": {"HOME_DIR": "${env:HOME}"}},
        "bad name!": {"type": "stdio", "command": "z"},
    }
    path.write_text(json.dumps({"servers": servers}))
    done = cli("import", "vscode", "--json")
    moved = {m["name"]: m for m in done.json()["moved"]}
    skipped = {s["name"]: s["reason"] for s in done.json()["skipped"]}
    assert "only VS Code can fill in" in skipped["asks"]
    assert load_config(emceepee_home / "config.toml").servers["refers"].env == {"HOME_DIR": "${HOME}"}
    assert moved["bad-name"]["source"] == "bad name!"
