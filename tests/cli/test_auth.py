"""`emceepee auth status` and `logout` on token files written by hand (as emceepee writes them, and
hostile ones: huge, not JSON, a FIFO, kept for another URL, readable by others, a symlink); `auth
login`'s refusals, each with what to do; `doctor`'s sign-in checks. Never a token in any output."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from emceepee_cli import paths
from emceepee_cli.signin.store import FILE_LIMIT, file_for, folder
from tests.cli.clirun import Ran, cli
from tests.support import example_table, write_config

ACCESS = "at-3f9c1a7e5b2d4c6a8e0f1b3d5a7c9e1f"  # distinct strings: any of them in an output is a leak
REFRESH = "rt-8e6c4a2f0d1b3e5c7a9f1d3b5e7c9a1d"
SECRET = "cs-1b3d5f7a9c2e4a6c8e0b2d4f6a8c0e2b"


def url_of(name: str) -> str:
    return f"https://{name}.example.com/mcp"


def remote_table(name: str, **extra: str) -> str:
    lines = [f"[servers.{name}]", f'url = "{url_of(name)}"']
    lines += [f"{key} = {value}" for key, value in extra.items()]
    return "\n".join(lines) + "\n"


def token_file(
    name: str,
    *,
    url: str | None = None,
    expires_in: float | None = 3600,
    refresh: bool = True,
    scope: str | None = "read write",
) -> Path:
    """The token file of `name`, as emceepee writes it (0600 in a 0700 folder)."""
    tokens: dict[str, Any] = {"access_token": ACCESS, "token_type": "Bearer"}
    if refresh:
        tokens["refresh_token"] = REFRESH
    if scope:
        tokens["scope"] = scope
    data: dict[str, Any] = {
        "server": name,
        "url": url or url_of(name),
        "tokens": tokens,
        "client": {"client_id": f"client-{name}", "client_secret": SECRET, "redirect_uris": []},
        "obtained_at": time.time(),
    }
    if expires_in is not None:
        data["expires_at"] = time.time() + expires_in
    return write_private(file_for(name), json.dumps(data))


def write_private(path: Path, text: str) -> Path:
    paths.ensure_private_dir(path.parent)
    path.write_text(text)
    path.chmod(0o600)
    return path


def no_secret_in(done: Ran) -> None:
    for secret in (ACCESS, REFRESH, SECRET):
        assert secret not in done.out and secret not in done.err


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """Remote servers in every state a token file can leave them, a local one and a static header."""
    path = write_config(
        tmp_path / "config.toml",
        remote_table("signed"),
        remote_table("renews"),
        remote_table("stale"),
        remote_table("moved"),
        remote_table("fresh"),
        remote_table("huge"),
        remote_table("garbage"),
        remote_table("fifo"),
        remote_table("static", headers='{ Authorization = "Bearer ${STATIC_TOKEN}" }'),
        example_table("local", "echo.py"),
    )
    token_file("signed")
    token_file("renews", expires_in=-60)
    token_file("stale", expires_in=-60, refresh=False, scope=None)
    token_file("moved", url="https://elsewhere.example.com/mcp")
    write_private(file_for("huge"), json.dumps({"url": url_of("huge"), "pad": "x" * FILE_LIMIT}))
    write_private(file_for("garbage"), "\x00not json{{{")
    os.mkfifo(file_for("fifo"), 0o600)
    return path


def rows_of(done: Ran) -> dict[str, dict[str, Any]]:
    return {row["server"]: row for row in done.json()["servers"]}


def test_status_says_each_remote_servers_sign_in_and_never_a_token(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATIC_TOKEN", ACCESS)
    shown = cli("auth", "status", "--config", str(config), "--json")
    assert shown.code == 0, shown.err
    rows = rows_of(shown)
    assert set(rows) == {"signed", "renews", "stale", "moved", "fresh", "huge", "garbage", "fifo", "static"}
    assert {name: row["state"] for name, row in rows.items()} == {
        "signed": "signed_in",
        "renews": "expired",
        "stale": "expired",
        "moved": "other_url",
        "fresh": "not_signed_in",
        "huge": "not_signed_in",
        "garbage": "not_signed_in",
        "fifo": "not_signed_in",
        "static": "static_header",
    }
    assert rows["signed"]["scopes"] == ["read", "write"] and rows["signed"]["refreshable"] is True
    assert rows["signed"]["expires_at"].endswith("Z") and "hint" not in rows["signed"]
    assert rows["renews"]["refreshable"] is True and "hint" not in rows["renews"]
    assert rows["stale"]["hint"] == "emceepee auth login stale"
    assert rows["moved"]["hint"] == "emceepee auth login moved"
    no_secret_in(shown)

    table = cli("auth", "status", "--config", str(config))
    assert table.code == 0
    lines = {line.split()[0]: line for line in table.out.splitlines()[1:]}
    assert "signed in" in lines["signed"] and "read write" in lines["signed"]
    assert rows["signed"]["expires_at"] in lines["signed"] and rows["renews"]["expires_at"] in lines["renews"]
    assert "renews by itself" in lines["renews"] and "sign in again" in lines["stale"]
    assert "another URL" in lines["moved"] and "not signed in" in lines["fresh"]
    assert "Authorization header" in lines["static"]
    assert "local" not in lines
    assert "emceepee auth login NAME, for stale, moved, fresh, huge, garbage, fifo" in table.err
    no_secret_in(table)


def test_status_of_one_server_and_of_servers_that_do_not_sign_in(config: Path) -> None:
    one = cli("auth", "status", "signed", "--config", str(config), "--json")
    assert one.code == 0 and [row["server"] for row in one.json()["servers"]] == ["signed"]
    local = cli("auth", "status", "local", "--config", str(config))
    assert local.code == 2 and "only remote servers sign in" in local.err
    unknown = cli("auth", "status", "nope", "--config", str(config))
    assert unknown.code == 2 and "Unknown server 'nope'" in unknown.err and "signed" in unknown.err


def test_a_token_file_others_can_read_or_a_symlink_is_said_and_still_never_shown(config: Path) -> None:
    file_for("signed").chmod(0o644)
    elsewhere = token_file("fresh")  # the real file; "fresh" is then a link to it
    target = elsewhere.with_name("kept-elsewhere.txt")
    elsewhere.rename(target)
    file_for("fresh").symlink_to(target)
    shown = cli("auth", "status", "--config", str(config), "--json")
    rows = rows_of(shown)
    assert "chmod 600" in rows["signed"]["warning"] and rows["signed"]["state"] == "signed_in"
    assert rows["fresh"]["state"] == "signed_in" and "warning" not in rows["fresh"]
    assert shown.json()["kept_for_others"] == []
    no_secret_in(shown)
    plain = cli("auth", "status", "--config", str(config))
    assert f"chmod 600 {file_for('signed')}" in plain.err
    no_secret_in(plain)


def test_status_names_token_files_of_servers_the_config_no_longer_has(config: Path) -> None:
    token_file("gone")
    shown = cli("auth", "status", "--config", str(config), "--json")
    assert shown.json()["kept_for_others"] == ["gone"]
    plain = cli("auth", "status", "--config", str(config))
    assert "emceepee auth logout gone" in plain.err


def test_logout_forgets_one_server_and_says_so(config: Path) -> None:
    forgot = cli("auth", "logout", "signed", "--config", str(config))
    assert forgot.code == 0 and "Forgot the sign-in kept for 'signed'" in forgot.out
    assert not file_for("signed").exists() and file_for("renews").exists()
    again = cli("auth", "logout", "signed", "--config", str(config), "--json")
    assert again.code == 0 and again.json() == {"forgotten": []}
    status = cli("auth", "status", "signed", "--config", str(config), "--json")
    assert status.json()["servers"][0]["state"] == "not_signed_in"
    no_secret_in(forgot)


def test_logout_of_a_server_no_longer_in_the_config_and_of_an_unknown_one(config: Path) -> None:
    token_file("gone")
    forgot = cli("auth", "logout", "gone", "--config", str(config), "--json")
    assert forgot.code == 0 and forgot.json() == {"forgotten": ["gone"]} and not file_for("gone").exists()
    unknown = cli("auth", "logout", "nope", "--config", str(config))
    assert unknown.code == 2 and "Unknown server 'nope'" in unknown.err and "auth status" in unknown.err


def test_logout_all_forgets_every_file_and_needs_a_name_or_all_not_both(config: Path) -> None:
    both = cli("auth", "logout", "signed", "--all", "--config", str(config))
    neither = cli("auth", "logout", "--config", str(config))
    assert both.code == neither.code == 2 and "--all" in both.err
    assert file_for("signed").exists()
    forgot = cli("auth", "logout", "--all", "--config", str(config), "--json")
    assert forgot.code == 0
    assert set(forgot.json()["forgotten"]) == {
        "signed",
        "renews",
        "stale",
        "moved",
        "huge",
        "garbage",
        "fifo",
    }
    assert list(folder().iterdir()) == []
    nothing = cli("auth", "logout", "--all", "--config", str(config))
    assert nothing.code == 0 and "Nothing was kept" in nothing.out


def test_login_refuses_what_cannot_sign_in_saying_what_to_do(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        remote_table("static", headers='{ Authorization = "Bearer ${STATIC_TOKEN}" }'),
        '[servers.needsvar]\nurl = "https://${TRACKER_HOST}/mcp"\n',
        example_table("local", "echo.py"),
    )
    unknown = cli("auth", "login", "nope", "--config", str(config))
    assert unknown.code == 2 and "Unknown server 'nope'. Known: static, needsvar." in unknown.err
    local = cli("auth", "login", "local", "--config", str(config))
    assert local.code == 2 and "only remote servers sign in" in local.err
    static = cli("auth", "login", "static", "--config", str(config), env={"STATIC_TOKEN": ACCESS})
    assert static.code == 2 and "uses the Authorization header" in static.err and ACCESS not in static.err
    unset = cli("auth", "login", "needsvar", "--config", str(config), env={"TRACKER_HOST": None})
    assert unset.code == 2 and "${TRACKER_HOST} is not set" in unset.err
    as_json = cli("auth", "login", "local", "--config", str(config), "--json")
    assert as_json.code == 2 and as_json.json()["exit_code"] == 2


def test_login_to_a_server_nobody_answers_says_it_cannot_reach_it(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = write_config(tmp_path / "config.toml", f'[servers.down]\nurl = "http://127.0.0.1:{port}/mcp"\n')
    done = cli("auth", "login", "down", "--no-browser", "--config", str(config))
    assert done.code == 3
    assert f"Cannot reach 'down' at http://127.0.0.1:{port}/mcp" in done.err
    assert "emceepee servers show down" in done.err and "Traceback" not in done.err


def test_doctor_reads_each_sign_in_and_fails_a_token_file_others_can_read(config: Path) -> None:
    file_for("stale").chmod(0o640)
    done = cli("doctor", "--config", str(config), "--no-backends", "--json")
    checks = {c["name"]: c for c in done.json()["checks"] if c["area"] == "sign-in"}
    assert set(checks) == {"signed", "renews", "stale", "moved", "fresh", "huge", "garbage", "fifo"}
    assert checks["signed"]["state"] == "ok" and "signed in until" in checks["signed"]["detail"]
    assert checks["renews"]["state"] == "ok" and "renewed without you" in checks["renews"]["detail"]
    assert checks["stale"]["state"] == "fail" and checks["stale"]["fix"] == f"chmod 600 {file_for('stale')}"
    assert checks["fresh"]["state"] == "note" and checks["fresh"]["fix"] == "emceepee auth login fresh"
    assert checks["moved"]["fix"] == "emceepee auth login moved"
    no_secret_in(done)
