"""`emceepee install HOST` on a temporary home folder, for every host: created when missing, other
keys kept, idempotent, backed up, dry run, uninstall, --file; each host's documented location."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from emceepee_cli.hosts import catalog
from tests.cli.clirun import cli

EXE = str(Path(sys.executable).parent / "emceepee")  # the console script of this environment


def servers(host: catalog.Host, path: Path) -> dict[str, dict[str, object]]:
    return dict(json.loads(path.read_text())[host.servers_key])


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".*.bak"))


@pytest.mark.parametrize("key", list(catalog.HOSTS))
def test_install_creates_the_hosts_file_with_an_entry_that_starts_this_emceepee(key: str, home: Path) -> None:
    host = catalog.HOSTS[key]
    done = cli("install", key)
    path = host.path()
    assert done.code == 0 and path.is_relative_to(home) and path.exists()
    entry = servers(host, path)["emceepee"]
    assert (
        entry["command"] == EXE and Path(str(entry["command"])).is_absolute() and entry["args"] == ["serve"]
    )
    assert entry.get("type") == ("stdio" if host.typed else None)
    assert backups(path) == []  # nothing to back up: the file is new


@pytest.mark.parametrize("key", list(catalog.HOSTS))
def test_install_keeps_every_other_key_backs_up_and_is_idempotent(key: str) -> None:
    host = catalog.HOSTS[key]
    path = host.path()
    path.parent.mkdir(parents=True, exist_ok=True)
    before: dict[str, Any] = {
        "theme": "dark",
        host.servers_key: {
            "other": {"command": "npx", "args": ["-y", "x"]},
            "emceepee": {
                "command": "/old/emceepee",
                "args": ["serve"],
                "env": {"GH_TOKEN": "ghp_0123456789abcdefghij"},
            },
        },
    }
    path.write_text(json.dumps(before))
    first = cli("install", key)
    after_first = path.read_text()
    second = cli("install", key)
    doc = json.loads(path.read_text())
    assert first.code == 0 and second.code == 0 and "already" in second.out
    assert path.read_text() == after_first and len(backups(path)) == 1
    assert json.loads(backups(path)[0].read_text()) == before
    assert doc["theme"] == "dark" and doc[host.servers_key]["other"] == before[host.servers_key]["other"]
    entry = doc[host.servers_key]["emceepee"]
    assert entry["command"] == EXE and entry["env"] == {"GH_TOKEN": "ghp_0123456789abcdefghij"}
    assert "ghp_" not in first.out + first.err


def test_dry_run_shows_the_diff_and_writes_nothing() -> None:
    path = catalog.HOSTS["cursor"].path()
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"mcpServers": {"gh": {"command": "x", "env": {"GITHUB_TOKEN": "ghp_0123456789abcdefghij"}}}}'
    )
    before = path.read_text()
    done = cli("install", "cursor", "--dry-run")
    assert done.code == 0 and path.read_text() == before and backups(path) == []
    assert f'"emceepee": {{"command": "{EXE}", "args": ["serve"]}}' in done.out
    assert '"GITHUB_TOKEN": "<hidden>"' in done.out and "ghp_" not in done.out


def test_uninstall_removes_only_emceepees_entry_and_again_changes_nothing() -> None:
    host = catalog.HOSTS["vscode"]
    cli("install", "vscode")
    path = host.path()
    data = json.loads(path.read_text())
    data[host.servers_key]["other"] = {"type": "stdio", "command": "x"}
    path.write_text(json.dumps(data))
    removed = cli("install", "vscode", "--uninstall")
    again = cli("install", "vscode", "--uninstall", "--json")
    assert removed.code == 0 and servers(host, path) == {"other": {"type": "stdio", "command": "x"}}
    assert again.json()["action"] == "absent" and len(backups(path)) == 1


def test_file_points_at_any_file_in_a_hosts_format(tmp_path: Path) -> None:
    target = tmp_path / "project" / ".cursor" / "mcp.json"
    done = cli("install", "cursor", "--file", str(target), "--config", str(tmp_path / "c.toml"))
    entry = json.loads(target.read_text())["mcpServers"]["emceepee"]
    assert done.code == 0 and entry["args"] == ["serve", "--config", str(tmp_path / "c.toml")]
    assert not catalog.HOSTS["cursor"].path().exists()


def test_a_file_with_comments_keeps_them_and_changes_only_the_entry() -> None:
    path = catalog.HOSTS["vscode"].path()
    path.parent.mkdir(parents=True)
    before = (
        '{\n  // mine\n  "servers": {"a": {"type": "stdio", "command": "x",},},\n  "url": "http://a//b"\n}\n'
    )
    path.write_text(before)
    done = cli("install", "vscode")
    entry = f'"emceepee": {{"type": "stdio", "command": "{EXE}", "args": ["serve"]}},'
    assert done.code == 0 and done.err == ""
    assert path.read_text() == before.replace('"x",},', f'"x",}}, {entry}')
    assert backups(path)[0].read_text() == before


def test_a_file_that_is_not_json_is_left_alone_with_a_clear_error() -> None:
    path = catalog.HOSTS["cursor"].path()
    path.parent.mkdir(parents=True)
    path.write_text("{ not json")
    done = cli("install", "cursor")
    assert done.code == 2 and f"{path} is not valid JSON" in done.err and path.read_text() == "{ not json"
    assert f'"emceepee": {{\n    "command": "{EXE}"' in done.err and backups(path) == []


def test_an_unknown_host_is_named_with_the_closest_known_one() -> None:
    done = cli("install", "cursr")
    assert done.code == 2 and "Unknown MCP host 'cursr'" in done.err and "'cursor'" in done.err


@pytest.mark.parametrize(
    ("key", "platform", "expected"),
    [
        ("claude-desktop", "darwin", "H/Library/Application Support/Claude/claude_desktop_config.json"),
        ("claude-desktop", "win32", "A/Claude/claude_desktop_config.json"),
        ("claude-desktop", "linux", "X/Claude/claude_desktop_config.json"),
        ("claude-code", "darwin", "H/.claude.json"),
        ("cursor", "win32", "H/.cursor/mcp.json"),
        ("vscode", "darwin", "H/Library/Application Support/Code/User/mcp.json"),
        ("vscode", "win32", "A/Code/User/mcp.json"),
        ("vscode", "linux", "X/Code/User/mcp.json"),
        ("windsurf", "linux", "H/.codeium/windsurf/mcp_config.json"),
        ("gemini-cli", "darwin", "H/.gemini/settings.json"),
        ("lm-studio", "win32", "H/.lmstudio/mcp.json"),
    ],
)
def test_each_hosts_documented_location_per_platform(key: str, platform: str, expected: str) -> None:
    path = catalog.HOSTS[key].path(platform, Path("H"), {"APPDATA": "A", "XDG_CONFIG_HOME": "X"})
    assert path == Path(expected)


def test_the_entry_names_the_executable_that_ran_install(home: Path) -> None:
    done = subprocess.run([EXE, "install", "claude-code"], capture_output=True, text=True, timeout=60)
    entry = json.loads((home / ".claude.json").read_text())["mcpServers"]["emceepee"]
    assert done.returncode == 0, done.stderr
    assert entry == {"type": "stdio", "command": EXE, "args": ["serve"]}
