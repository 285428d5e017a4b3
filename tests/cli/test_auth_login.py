"""`emceepee auth login`, `status`, `call`, `tools`, `doctor` and `logout` as real processes against a
real OAuth-protected backend (tests/backends/http_signin.py, with its own auto-approving
authorization server) and a browser that follows the link (tests/backends/follow_browser.py): the
tokens land in the 0600 file, no output ever shows one, `call` uses them or signs in inline, and
`doctor` never signs in."""

from __future__ import annotations

import json
import os
import select
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from emceepee_cli.signin.store import file_for
from tests.signin.parts import Mock, browser, opened, running, sign_in_log
from tests.support import ROOT, interruptible, run_cli, write_config


@pytest.fixture
def mock() -> Iterator[Mock]:
    with running() as started:
        yield started


@pytest.fixture
def config(tmp_path: Path, mock: Mock) -> Path:
    return write_config(tmp_path / "config.toml", f'[servers.tracker]\nurl = "{mock.base}/mcp"\n')


def env_with(tmp_path: Path, looks: bool = True) -> dict[str, str]:
    return {**os.environ, **browser(tmp_path, looks=looks)}


def kept() -> dict[str, Any]:
    return dict(json.loads(file_for("tracker").read_text()))


def secrets_kept() -> list[str]:
    data = kept()
    found = [data["tokens"]["access_token"], data["tokens"].get("refresh_token")]
    found.append(data.get("client", {}).get("client_secret"))
    return [secret for secret in found if secret]


def shows_none(done: subprocess.CompletedProcess[str], secrets: list[str]) -> None:
    for secret in secrets:
        assert secret not in done.stdout and secret not in done.stderr


def authorizations(mock: Mock) -> int:
    return sum(entry["endpoint"] == "authorize" for entry in sign_in_log(mock))


def test_login_status_call_and_logout_against_a_real_authorization_server(
    tmp_path: Path, mock: Mock, config: Path
) -> None:
    env = env_with(tmp_path)
    login = run_cli("auth", "login", "tracker", "--config", str(config), env=env)
    assert login.returncode == 0, login.stderr
    assert "Signed in to 'tracker'" in login.stdout and "renews:" in login.stdout
    assert f"asks you to sign in at {mock.base.removeprefix('http://')}" in login.stderr
    assert "Signed in to 'tracker'." in login.stderr
    assert len(opened(tmp_path)) == 1 and opened(tmp_path)[0] in login.stderr
    assert stat.S_IMODE(file_for("tracker").stat().st_mode) == 0o600
    secrets = secrets_kept()
    shows_none(login, secrets)

    status = run_cli("auth", "status", "--config", str(config), "--json", env=env)
    [row] = json.loads(status.stdout)["servers"]
    assert row["state"] == "signed_in" and row["refreshable"] is True and row["expires_at"]
    shows_none(status, secrets)

    asked = authorizations(mock)
    called = run_cli("call", "tracker", "echo", "text=hello", "--config", str(config), env=env)
    assert called.returncode == 0 and called.stdout == "hello\n", called.stderr
    assert len(opened(tmp_path)) == 1 and authorizations(mock) == asked  # the stored token was used
    shows_none(called, secrets)

    out = run_cli("auth", "logout", "tracker", "--config", str(config), env=env)
    assert out.returncode == 0 and "Forgot the sign-in kept for 'tracker'" in out.stdout
    assert not file_for("tracker").exists()
    after = run_cli("auth", "status", "tracker", "--config", str(config), "--json", env=env)
    assert json.loads(after.stdout)["servers"][0]["state"] == "not_signed_in"


def test_login_again_forgets_the_tokens_but_keeps_the_client_registration(
    tmp_path: Path, config: Path
) -> None:
    env = env_with(tmp_path)
    assert run_cli("auth", "login", "tracker", "--config", str(config), env=env).returncode == 0
    first = kept()
    again = run_cli("auth", "login", "tracker", "--config", str(config), "--json", env=env)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["signed_in"] is True and len(opened(tmp_path)) == 2
    assert kept()["client"]["client_id"] == first["client"]["client_id"]
    assert kept()["tokens"]["access_token"] != first["tokens"]["access_token"]
    shows_none(again, secrets_kept())


def test_login_without_a_browser_prints_the_link_to_open(tmp_path: Path, config: Path) -> None:
    env = env_with(tmp_path)
    command = [sys.executable, "-m", "emceepee_cli", "auth", "login", "tracker", "--no-browser"]
    with subprocess.Popen(
        [*command, "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    ) as login:
        assert login.stderr is not None
        said = []
        for line in login.stderr:  # bounded: the command prints the link, then waits for it
            said.append(line)
            if line.startswith("  http://"):
                break
        assert "Open this link in a browser on this machine" in "".join(said)
        with httpx2.Client(follow_redirects=True, timeout=10, trust_env=False) as http:
            assert http.get(said[-1].strip()).status_code == 200
        out, err = login.communicate(timeout=60)
    assert login.returncode == 0, err
    assert "Signed in to 'tracker'" in out and opened(tmp_path) == []


def test_ctrl_c_gives_up_the_sign_in(tmp_path: Path, config: Path) -> None:
    command = [sys.executable, "-m", "emceepee_cli", "auth", "login", "tracker", "--no-browser"]
    with subprocess.Popen(
        [*command, "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env_with(tmp_path),
        preexec_fn=interruptible,  # the test's Ctrl-C must reach it
    ) as login:
        assert login.stderr is not None
        said = b""
        deadline = time.monotonic() + 60
        while b"\n  http://" not in said:  # the command prints the link, then waits for it
            left = deadline - time.monotonic()
            assert left > 0 and login.poll() is None, said
            if select.select([login.stderr], [], [], left)[0]:
                said += os.read(login.stderr.fileno(), 65536)
        login.send_signal(signal.SIGINT)
        out_bytes, err_bytes = login.communicate(timeout=30)
    out, err = out_bytes.decode(), (said + err_bytes).decode()
    assert login.returncode == 130 and out == ""
    assert "Gave up signing in to 'tracker'" in err and "Traceback" not in err
    assert "tokens" not in kept()


def test_call_signs_in_inline_when_the_server_asks(tmp_path: Path, mock: Mock, config: Path) -> None:
    env = env_with(tmp_path)
    called = run_cli("call", "tracker", "echo", "text=hi", "--config", str(config), env=env)
    assert called.returncode == 0 and called.stdout == "hi\n", called.stderr
    assert "asks you to sign in" in called.stderr and "Signed in to 'tracker'." in called.stderr
    assert len(opened(tmp_path)) == 1
    shows_none(called, secrets_kept())
    status = run_cli("auth", "status", "tracker", "--config", str(config), "--json", env=env)
    assert json.loads(status.stdout)["servers"][0]["state"] == "signed_in"


def test_tools_of_every_server_and_doctor_never_sign_in_and_say_what_to_run(
    tmp_path: Path, config: Path
) -> None:
    env = env_with(tmp_path)
    listed = run_cli("tools", "--config", str(config), env=env)
    assert listed.returncode == 0, listed.stderr
    assert "needs you to sign in" in listed.stdout and "emceepee auth login tracker" in listed.stderr
    doctor = run_cli("doctor", "--config", str(config), "--wait", "20", "--json", env=env)
    checks = {(c["area"], c["name"]): c for c in json.loads(doctor.stdout)["checks"]}
    backend = checks[("backend", "tracker")]
    assert backend["state"] == "fail" and "needs sign-in" in backend["detail"]
    assert backend["fix"] == "emceepee auth login tracker"
    assert checks[("sign-in", "tracker")]["state"] == "note"
    assert "Traceback" not in doctor.stderr + listed.stderr and opened(tmp_path) == []
    assert "tokens" not in kept()  # its client registration only: no sign-in happened

    assert run_cli("auth", "login", "tracker", "--config", str(config), env=env).returncode == 0
    healthy = run_cli("doctor", "--config", str(config), "--wait", "20", "--json", env=env)
    checks = {(c["area"], c["name"]): c for c in json.loads(healthy.stdout)["checks"]}
    assert checks[("backend", "tracker")]["state"] == "ok"
    assert checks[("sign-in", "tracker")]["state"] == "ok"
    shows_none(healthy, secrets_kept())


def test_login_and_call_over_the_legacy_sse_transport(tmp_path: Path) -> None:
    with running("--sse") as mock:
        config = write_config(
            tmp_path / "config.toml", f'[servers.tracker]\nurl = "{mock.base}/sse"\ntransport = "sse"\n'
        )
        env = env_with(tmp_path)
        login = run_cli("auth", "login", "tracker", "--config", str(config), env=env)
        assert login.returncode == 0 and "Signed in to 'tracker'" in login.stdout, login.stderr
        assert kept()["url"] == f"{mock.base}/sse"
        called = run_cli("call", "tracker", "echo", "text=over sse", "--config", str(config), env=env)
    assert called.returncode == 0 and called.stdout == "over sse\n", called.stderr
    assert len(opened(tmp_path)) == 1
    shows_none(login, secrets_kept())
    shows_none(called, secrets_kept())


def test_login_refused_by_the_authorization_server_says_so(tmp_path: Path) -> None:
    with running("--deny") as denying:
        config = write_config(tmp_path / "config.toml", f'[servers.tracker]\nurl = "{denying.base}/mcp"\n')
        done = run_cli("auth", "login", "tracker", "--config", str(config), env=env_with(tmp_path))
        called = run_cli(
            "call", "tracker", "echo", "text=hi", "--config", str(config), env=env_with(tmp_path)
        )
    assert done.returncode == 3
    assert "refused by its authorization server: access_denied" in done.stderr
    assert "emceepee auth login tracker" in done.stderr and "Traceback" not in done.stderr
    assert called.returncode == 3 and called.stdout == ""
    assert "refused by its authorization server" in called.stderr and "Traceback" not in called.stderr


def test_login_to_a_server_that_never_asks_stores_nothing(tmp_path: Path) -> None:
    script = ROOT / "tests" / "backends" / "http_echo.py"
    with subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True) as server:
        try:
            assert server.stdout is not None
            port = int(server.stdout.readline())
            config = write_config(
                tmp_path / "config.toml", f'[servers.open]\nurl = "http://127.0.0.1:{port}/mcp"\n'
            )
            done = run_cli("auth", "login", "open", "--config", str(config), env=env_with(tmp_path))
        finally:
            server.terminate()
            server.wait(timeout=10)
    assert done.returncode == 0, done.stderr
    assert "did not ask for sign-in" in done.stdout and "Nothing was stored" in done.stdout
    assert opened(tmp_path) == [] and not file_for("open").exists()
