"""The user's config.toml keeps what they wrote: `servers add/remove/enable/disable` (real CLI
processes) change only the table they name; comments, order, layout and CRLF stay; an editor's
save between emceepee's read and write is not lost; a layout emceepee cannot edit is refused with
the table to paste."""

from __future__ import annotations

import difflib
import stat
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from emceepee_cli.config import ServerSpec, add_server, edit, write
from emceepee_cli.errors import ConfigError
from tests.support import run_cli

# Odd on purpose: comments everywhere, a multi-line array, an inline table, no spaces around `=`,
# a sub-table, a commented-out key, tables out of the usual order.
HAND_WRITTEN = """\
# my emceepee config   (hand-written)

[servers.git]
command = "/usr/bin/env"   # the launcher
args = [
  "uvx", "mcp-server-git",   # the package
]
env = { GIT_TOKEN = "${GIT_TOKEN}" }   # from the host's env block

[defaults]
timeout_ms = 1000   # short

[servers.echo]
command="/bin/cat"
[servers.echo.env]
GREETING = "hi"  # one
# GREETING = "hello"   (the old one)

# the end
"""


@pytest.fixture
def config(emceepee_home: Path) -> Path:
    emceepee_home.mkdir()
    path = emceepee_home / "config.toml"
    path.write_text(HAND_WRITTEN)
    return path


def changed(before: str, after: str) -> list[str]:
    """The lines a diff of the two texts shows as removed (-) or added (+)."""
    return [
        line.rstrip("\n")
        for line in difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def emceepee(*args: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr


def test_each_servers_command_changes_only_the_table_it_names(config: Path) -> None:
    emceepee("servers", "add", "new", "-e", "MODE=fast", "--", "/bin/echo", "hi")
    added = config.read_text()
    assert changed(HAND_WRITTEN, added) == [
        "+[servers.new]",
        '+command = "/bin/echo"',
        '+args = ["hi"]',
        '+env = {MODE = "fast"}',
        "+",
    ]
    assert added.index("[servers.new]") > added.index("(the old one)")  # after the last server table
    emceepee("servers", "disable", "git")
    assert changed(added, config.read_text()) == ["+enabled = false"]
    assert "from the host's env block\nenabled = false\n\n[defaults]" in config.read_text()
    emceepee("servers", "enable", "git")
    assert config.read_text() == added
    emceepee("servers", "remove", "new")
    assert config.read_text() == HAND_WRITTEN
    emceepee("servers", "remove", "git")
    assert config.read_text() == HAND_WRITTEN.replace(
        HAND_WRITTEN[HAND_WRITTEN.index("[servers.git]") : HAND_WRITTEN.index("[defaults]")], ""
    )
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


def test_replacing_a_server_keeps_the_comments_of_the_keys_it_keeps(config: Path) -> None:
    emceepee("servers", "add", "git", "--replace", "--", "/usr/bin/env", "uvx", "mcp-server-git", "-v")
    assert changed(HAND_WRITTEN, config.read_text()) == [
        "-args = [",
        '-  "uvx", "mcp-server-git",   # the package',
        "-]",
        '-env = { GIT_TOKEN = "${GIT_TOKEN}" }   # from the host\'s env block',
        '+args = ["uvx", "mcp-server-git", "-v"]',
    ]
    assert 'command = "/usr/bin/env"   # the launcher' in config.read_text()


def test_a_crlf_config_stays_crlf(config: Path) -> None:
    config.write_bytes(HAND_WRITTEN.replace("\n", "\r\n").encode())
    emceepee("servers", "add", "new", "--", "/bin/echo")
    emceepee("servers", "disable", "echo")
    after = config.read_bytes().decode()
    assert after.count("\n") == after.count("\r\n")
    lines = [line for line in changed(HAND_WRITTEN.replace("\n", "\r\n"), after) if line != "+\r"]
    assert lines == ["+enabled = false\r", "+[servers.new]\r", '+command = "/bin/echo"\r']  # and blank lines


@pytest.mark.parametrize(
    ("written", "disabled"),
    [
        (
            '[servers]\n# mine\ngit = { command = "/bin/cat" }  # inline\nb = { command = "/bin/ls" }\n',
            '[servers]\n# mine\ngit = { command = "/bin/cat", enabled = false}  # inline\n'
            'b = { command = "/bin/ls" }\n',
        ),
        (
            'servers.git.command = "/bin/cat"  # dotted\n# after\n',
            'servers.git.command = "/bin/cat"  # dotted\nservers.git.enabled = false\n# after\n',
        ),
    ],
)
def test_a_server_written_inline_changes_only_on_its_line(config: Path, written: str, disabled: str) -> None:
    config.write_text(written)
    emceepee("servers", "disable", "git")
    assert config.read_text() == disabled


def test_a_layout_emceepee_cannot_edit_is_refused_with_the_table_to_paste(config: Path) -> None:
    config.write_text('# an array of tables, by mistake\n[[servers.git]]\ncommand = "/bin/cat"\n')
    before = config.read_bytes()
    done = run_cli("servers", "add", "git", "--replace", "--", "/bin/echo")
    assert done.returncode == 2 and "cannot be written without changing other parts" in done.stderr
    assert '[servers.git]\ncommand = "/bin/echo"\n' in done.stderr and "Nothing was written" in done.stderr
    assert config.read_bytes() == before


def test_a_link_to_the_config_stays_a_link(config: Path, tmp_path: Path) -> None:
    kept = tmp_path / "dotfiles" / "emceepee.toml"
    kept.parent.mkdir()
    config.rename(kept)
    config.symlink_to(kept)
    emceepee("servers", "disable", "echo")
    assert config.is_symlink() and "enabled = false" in kept.read_text()


def test_a_big_config_changes_in_one_line(config: Path) -> None:
    big = "".join(
        f'# server {i}\n[servers.s{i}]\ncommand = "/bin/cat"  # c\nargs = ["{i}"]\n\n' for i in range(3000)
    )
    config.write_text(big)
    started = time.monotonic()
    emceepee("servers", "disable", "s1500")
    took = time.monotonic() - started
    assert changed(big, config.read_text()) == ["+enabled = false"]
    print(f"disabling one server of {len(big) // 1000} kB of config took {took:.1f} s")


def editor_saves(path: Path, times: int) -> Callable[..., str]:
    """put_server, but an editor saves the file (a comment added) between emceepee's read and
    its write, the first `times` times."""
    real = edit.put_server
    saves = iter(range(times))

    def put(*args: object) -> str:
        if next(saves, None) is not None:
            text = path.read_text()
            path.write_text(text.replace("[defaults]", "# saved meanwhile\n[defaults]", 1))
        return real(*args)  # type: ignore[arg-type]

    return put


def test_an_editors_save_between_read_and_write_is_kept(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write, "put_server", editor_saves(config, times=1))
    add_server(ServerSpec("new", command="/bin/echo"), config)
    after = config.read_text()
    assert "# saved meanwhile\n[defaults]" in after and "[servers.new]" in after
    assert set(tomllib.loads(after)["servers"]) == {"git", "echo", "new"}


def test_a_file_that_keeps_changing_is_left_to_the_editor(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(write, "put_server", editor_saves(config, times=write.EDIT_ATTEMPTS))
    with pytest.raises(ConfigError) as refused:
        add_server(ServerSpec("new", command="/bin/echo"), config)
    assert "kept changing while emceepee was editing it" in refused.value.message
    after = config.read_text()
    assert after.count("# saved meanwhile") == write.EDIT_ATTEMPTS and "[servers.new]" not in after
