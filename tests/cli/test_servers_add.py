"""`servers add` parses its own options (only what follows `--` is the command) and resolves PATH;
`servers enable/disable/show`; every server of the file is listed, broken ones too."""

from __future__ import annotations

import os
import stat
import sys
import tomllib
from pathlib import Path

import pytest

from emceepee_cli.config import load_config
from tests.cli.clirun import cli
from tests.support import EXAMPLES, write_config


@pytest.fixture
def config(emceepee_home: Path) -> Path:
    emceepee_home.mkdir(exist_ok=True)
    return emceepee_home / "config.toml"


@pytest.fixture
def host_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A host's PATH that holds only `hostcmd`; this shell's PATH adds a folder with `shellcmd`."""
    host_bin, shell_bin = tmp_path / "host-bin", tmp_path / "shell-bin"
    for folder, name in ((host_bin, "hostcmd"), (shell_bin, "shellcmd")):
        folder.mkdir()
        script = folder / name
        script.write_text("#!/bin/sh\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("EMCEEPEE_HOST_PATH", str(host_bin))
    monkeypatch.setenv("PATH", f"{shell_bin}{os.pathsep}{os.environ['PATH']}")
    return shell_bin


def test_an_option_before_the_double_dash_is_emceepees(config: Path) -> None:
    done = cli("servers", "add", "x", "--disabled", "--", "cmd", "--flag")
    spec = load_config(config).servers["x"]
    assert done.code == 0 and spec.command == "cmd" and spec.args == ("--flag",) and not spec.enabled


def test_everything_after_the_double_dash_is_the_command_even_emceepees_options(config: Path) -> None:
    done = cli("servers", "add", "x", "-e", "A=1", "--", "cmd", "--disabled", "-e", "B=2", "--json")
    spec = load_config(config).servers["x"]
    assert done.code == 0, done.err
    assert spec.args == ("--disabled", "-e", "B=2", "--json") and spec.enabled and spec.env == {"A": "1"}


def test_a_mistyped_option_is_an_error_and_nothing_is_written(config: Path) -> None:
    done = cli("servers", "add", "x", "--disable", "--", "cmd")
    assert done.code == 2 and "No such option: --disable" in done.err
    assert not config.exists()


def test_a_command_without_the_double_dash_is_refused(config: Path) -> None:
    done = cli("servers", "add", "x", "cmd", "arg")
    assert done.code == 2 and "unexpected extra argument" in done.err
    assert not config.exists()


def test_a_bad_value_names_the_option_it_came_from_not_the_config_file(config: Path) -> None:
    bad_url = cli("servers", "add", "x", "--url", "ftp://host/mcp")
    bad_header = cli("servers", "add", "x", "--url", "https://host/mcp", "-H", "nokey")
    bad_ref = cli("servers", "add", "x", "-e", "T=${1BAD}", "--", "cmd")
    assert "--url: must start with http:// or https://" in bad_url.err
    assert "--header 'nokey' has no '='" in bad_header.err
    assert "--env T:" in bad_ref.err
    assert all(d.code == 2 and "config.toml" not in d.err for d in (bad_url, bad_header, bad_ref))
    assert not config.exists()


def test_a_command_only_this_shell_finds_is_saved_by_its_full_path_and_said_so(
    config: Path, host_path: Path
) -> None:
    done = cli("servers", "add", "x", "--", "shellcmd", "--arg")
    assert done.code == 0
    assert load_config(config).servers["x"].command == str(host_path / "shellcmd")
    assert (
        "not on the PATH an MCP host usually gives emceepee" in done.err
        and str(host_path / "shellcmd") in done.err
    )


def test_no_resolve_keeps_the_name_and_still_warns(config: Path, host_path: Path) -> None:
    done = cli("servers", "add", "x", "--no-resolve", "--", "shellcmd")
    assert done.code == 0 and load_config(config).servers["x"].command == "shellcmd"
    assert "a host will not find it" in done.err


def test_a_command_a_host_finds_is_kept_as_typed_without_a_warning(config: Path, host_path: Path) -> None:
    done = cli("servers", "add", "x", "--", "hostcmd")
    assert done.code == 0 and load_config(config).servers["x"].command == "hostcmd" and done.err == ""


def test_a_command_nobody_finds_is_kept_and_the_warning_names_both_paths(
    config: Path, host_path: Path
) -> None:
    done = cli("servers", "add", "x", "--", "nosuchcmd")
    assert done.code == 0 and load_config(config).servers["x"].command == "nosuchcmd"
    assert "was not found on PATH" in done.err and os.environ["EMCEEPEE_HOST_PATH"] in done.err


def test_the_readmes_remote_example_is_listed_even_while_its_variable_is_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("API_TOKEN", raising=False)
    config = tmp_path / "mine.toml"
    added = cli(
        "servers",
        "add",
        "remote",
        "--url",
        "https://example.com/mcp",
        "-H",
        "Authorization=Bearer ${API_TOKEN}",
        "--config",
        str(config),
    )
    listed = cli("servers", "list", "--config", str(config))
    as_json = cli("servers", "list", "--config", str(config), "--json").json()
    assert added.code == 0 and "${API_TOKEN} is not set" in added.err
    assert listed.code == 0 and "remote  invalid" in listed.out
    assert f"{config}: server 'remote', field 'headers.Authorization'" in listed.err
    row = as_json["servers"][0]
    assert row["name"] == "remote" and row["status"] == "invalid" and str(config) in row["problems"][0]


def test_enable_and_disable_switch_a_server_and_say_when_nothing_changed(config: Path) -> None:
    cli("servers", "add", "x", "--disabled", "--", "cmd")
    enabled = cli("servers", "enable", "x")
    again = cli("servers", "enable", "x")
    assert load_config(config).servers["x"].enabled
    disabled = cli("servers", "disable", "x", "--json")
    assert not load_config(config).servers["x"].enabled
    assert "now enabled" in enabled.out and "already enabled" in again.out
    assert disabled.json() == {
        "name": "x",
        "enabled": False,
        "changed": True,
        "config": str(config),
        "problems": [],
    }


def test_a_server_whose_variable_is_unset_can_still_be_disabled(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    write_config(config, '[servers.x]\nurl = "https://h/mcp"\nheaders = { A = "${NOPE_TOKEN}" }\n')
    done = cli("servers", "disable", "x")
    assert done.code == 0 and load_config(config).servers["x"].enabled is False


def test_show_hides_a_literal_secret_and_shows_a_reference_as_written(config: Path) -> None:
    write_config(
        config,
        '[servers.gh]\ncommand = "cmd"\n'
        'env = { GITHUB_TOKEN = "ghp_0123456789abcdefghij", REF = "${GH}", DEBUG = "1" }\n',
    )
    done = cli("servers", "show", "gh", "--json")
    server = done.json()["server"]
    assert server["env"] == {"GITHUB_TOKEN": "<hidden: 24 characters>", "REF": "${GH}", "DEBUG": "1"}
    assert "ghp_" not in cli("servers", "show", "gh").out
    assert server["log"].endswith("gh.log") and server["host_path"]


def test_show_names_an_unknown_server_with_the_known_ones(config: Path) -> None:
    cli("servers", "add", "fs", "--", "cmd")
    done = cli("servers", "show", "gh")
    assert done.code == 2 and "Unknown server 'gh'" in done.err and "fs" in done.err


@pytest.fixture
def two_pythons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path) -> tuple[Path, Path]:
    """A venv's `python3` first on this shell's PATH; another `python3` (without the venv's
    packages) on the PATH a host gives emceepee, which this shell has too, later."""
    venv_bin, system_bin = tmp_path / "venv" / "bin", tmp_path / "system-bin"
    for folder, body in ((venv_bin, f'exec {sys.executable} "$@"'), (system_bin, "exit 1")):
        folder.mkdir(parents=True)
        script = folder / "python3"
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("EMCEEPEE_HOST_PATH", f"{system_bin}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setenv("PATH", f"{venv_bin}{os.pathsep}{system_bin}{os.pathsep}{os.environ['PATH']}")
    return venv_bin, system_bin


def test_a_venvs_python_is_saved_by_its_full_path_when_a_host_would_run_another(
    config: Path, two_pythons: tuple[Path, Path]
) -> None:
    venv_bin, system_bin = two_pythons
    done = cli("servers", "add", "echo", "--", "python3", str(EXAMPLES / "echo.py"))
    assert done.code == 0 and load_config(config).servers["echo"].command == str(venv_bin / "python3")
    assert f"'python3' is {venv_bin / 'python3'} on this shell's PATH" in done.err
    assert f"would run {system_bin / 'python3'} instead" in done.err and "--no-resolve keeps" in done.err


def test_no_resolve_keeps_the_name_and_names_the_program_a_host_would_run(
    config: Path, two_pythons: tuple[Path, Path]
) -> None:
    _, system_bin = two_pythons
    done = cli("servers", "add", "echo", "--no-resolve", "--", "python3", str(EXAMPLES / "echo.py"))
    assert done.code == 0 and load_config(config).servers["echo"].command == "python3"
    assert f"would run {system_bin / 'python3'} instead. Kept as typed (--no-resolve)." in done.err


def test_the_venvs_python_passes_doctor_and_the_name_kept_as_typed_fails_it(
    config: Path, two_pythons: tuple[Path, Path]
) -> None:
    """What the README's echo example does from a venv: the host's `python3` is another one."""
    cli("servers", "add", "echo", "--", "python3", str(EXAMPLES / "echo.py"))
    cli("servers", "add", "kept", "--no-resolve", "--", "python3", str(EXAMPLES / "echo.py"))
    doctor = cli("doctor", "--json", "--wait", "20")
    checks = {c["name"]: c for c in doctor.json()["checks"] if c["area"] == "backend"}
    assert checks["echo"]["state"] == "ok" and checks["kept"]["state"] == "fail", checks


def test_a_folder_reached_through_a_link_is_the_same_folder(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`/bin` and `/usr/bin` on a merged-/usr system: one program, kept by its name, no warning."""
    real = tmp_path / "usr-bin"
    real.mkdir()
    (real / "tool").write_text("#!/bin/sh\n")
    (real / "tool").chmod(0o755)
    (tmp_path / "bin").symlink_to(real)
    monkeypatch.setenv("EMCEEPEE_HOST_PATH", str(real))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    done = cli("servers", "add", "x", "--", "tool")
    assert done.code == 0 and load_config(config).servers["x"].command == "tool" and done.err == ""


SECRET = "sk-live-0123456789abcdefXYZ"


@pytest.mark.parametrize(
    ("typed", "option", "form"),
    [
        (["-e", f"API_KEY={SECRET}", "--", "npx", "srv"], "--env API_KEY", "-e 'API_KEY=${API_KEY}'"),
        (
            ["--url", "https://h/mcp", "-H", f"Authorization=Bearer {SECRET}"],
            "--header Authorization",
            "-H 'Authorization=Bearer ${API_AUTHORIZATION}'",
        ),
        (["--url", f"https://h/mcp?api_key={SECRET}"], "--url", "--url '${API_URL}'"),
    ],
)
def test_a_secret_looking_value_is_refused_with_the_var_form_to_use_and_nothing_is_written(
    config: Path, home: Path, typed: list[str], option: str, form: str
) -> None:
    done = cli("servers", "add", "api", *typed)
    as_json = cli("servers", "add", "api", "--json", *typed)
    assert done.code == 2 and f"the value of {option} looks like a secret" in done.err
    assert "(here: none yet: `emceepee install HOST` adds one)" in done.err
    assert form in done.err and "Nothing was written" in done.err and "--allow-secrets" in done.err
    assert as_json.code == 2 and as_json.json()["error"]["type"] == "UsageError"
    assert SECRET not in done.err + done.out + as_json.out and not config.exists()


def test_the_refusal_names_the_files_where_the_value_goes_and_keeps_the_other_options(
    config: Path, home: Path
) -> None:
    cursor = home / ".cursor" / "mcp.json"
    cursor.parent.mkdir(parents=True)
    cursor.write_text('{"mcpServers": {"emceepee": {"command": "emceepee", "args": ["serve"]}}}')
    done = cli(
        "servers",
        "add",
        "gh",
        "--disabled",
        "-e",
        "DEBUG=1",
        "-e",
        f"GITHUB_TOKEN={SECRET}",
        "--",
        "npx",
        "gh",
    )
    assert done.code == 2 and f"(here: {cursor})" in done.err
    assert (
        "emceepee servers add gh -e DEBUG=1 -e 'GITHUB_TOKEN=${GITHUB_TOKEN}' --disabled -- npx gh"
        in done.err
    )
    assert SECRET not in done.err and not config.exists()


def test_allow_secrets_saves_the_value_as_typed_and_a_reference_needs_no_permission(config: Path) -> None:
    allowed = cli("servers", "add", "a", "--allow-secrets", "-e", f"API_KEY={SECRET}", "--", "cmd")
    referred = cli("servers", "add", "b", "-e", "API_KEY=${API_KEY}", "--", "cmd")
    plain = cli("servers", "add", "c", "-e", "DEBUG=1", "-e", "MODE=fast", "--", "cmd")
    servers = tomllib.loads(config.read_text())["servers"]
    assert allowed.code == referred.code == plain.code == 0
    assert servers["a"]["env"] == {"API_KEY": SECRET} and servers["b"]["env"] == {"API_KEY": "${API_KEY}"}
