"""config/edit.py on the layouts a hand-written config.toml takes: one [servers.NAME] table changes,
every other byte stays; a layout it cannot edit is refused with the table to paste."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from emceepee_cli.config import edit, layout

COMMENTED = """\
# my emceepee config   (hand-written)
[defaults]
timeout_ms = 1000   # short

# git, for the app
[servers.git]
command = "uvx"          # the launcher
protocol = "legacy"      # said out loud, though it is the default
args = [
  "mcp-server-git",      # the package
  "--repository", "~/src/app",
]
env = { GIT_TOKEN = "${GIT_TOKEN}" }   # from the host's env block

[servers.echo]
command="python3"
[servers.echo.env]
GREETING = "hi"  # one
# GREETING = "hello"   (the old one)

# the end
"""


def put(text: str, name: str, table: dict[str, Any]) -> str:
    return edit.put_server(text, tomllib.loads(text), name, table)


def drop(text: str, name: str) -> str:
    return edit.drop_server(text, tomllib.loads(text), name)


GIT = {
    "command": "uvx",
    "protocol": "legacy",
    "args": ["mcp-server-git", "--repository", "~/src/app"],
    "env": {"GIT_TOKEN": "${GIT_TOKEN}"},
}


def test_a_changed_key_keeps_every_comment_of_the_table_and_the_rest_of_the_file() -> None:
    after = put(COMMENTED, "git", {**GIT, "enabled": False})
    assert after == COMMENTED.replace(
        '"${GIT_TOKEN}" }   # from the host\'s env block\n',
        '"${GIT_TOKEN}" }   # from the host\'s env block\nenabled = false\n',
    )
    assert put(after, "git", GIT) == COMMENTED


def test_a_sub_table_is_edited_in_place_and_its_comments_stay() -> None:
    after = put(COMMENTED, "echo", {"command": "python3", "env": {"GREETING": "hi", "NAME": "x"}})
    assert after == COMMENTED.replace('GREETING = "hi"  # one\n', 'GREETING = "hi"  # one\nNAME = "x"\n')


def test_a_new_server_goes_after_the_last_server_table_with_one_blank_line() -> None:
    after = put(COMMENTED, "new", {"command": "x", "env": {"K": "v"}})
    new = '\n[servers.new]\ncommand = "x"\nenv = {K = "v"}\n'
    assert after == COMMENTED.replace("(the old one)\n", "(the old one)\n" + new)


def test_removing_a_server_takes_its_block_and_the_comments_right_above_it() -> None:
    assert drop(COMMENTED, "git") == COMMENTED.replace(
        COMMENTED[COMMENTED.index("# git, for") : COMMENTED.index("[servers.echo]")], ""
    )
    without_echo = drop(COMMENTED, "echo")  # with the comment under its last key, and one blank line
    assert without_echo == COMMENTED.replace(
        COMMENTED[COMMENTED.index("[servers.echo]") : COMMENTED.index("# the end")], ""
    )


def test_crlf_stays_crlf_even_on_new_lines() -> None:
    text = COMMENTED.replace("\n", "\r\n")
    after = put(put(text, "git", {**GIT, "enabled": False}), "new", {"command": "x"})
    assert after.count("\n") == after.count("\r\n") and "enabled = false\r\n" in after
    assert drop(drop(after, "new"), "git").startswith(text[: text.index("# git, for")])


@pytest.mark.parametrize(
    ("text", "after"),
    [
        (  # a [servers] table of inline tables
            '[servers]\n# mine\na = { command = "x" }  # a\nb = { command = "y" }\n',
            '[servers]\n# mine\na = { command = "x", enabled = false}  # a\nb = { command = "y" }\n',
        ),
        (  # one inline table for them all
            'servers = { a = { command = "x" } }  # all\n',
            'servers = { a = { command = "x", enabled = false} }  # all\n',
        ),
        (  # dotted keys
            'servers.a.command = "x"  # here\n# after\n',
            'servers.a.command = "x"  # here\nservers.a.enabled = false\n# after\n',
        ),
        (  # the table split by another one
            '[servers.a]\ncommand = "x"\n[defaults]\ntimeout_ms = 5\n[servers.a.env]\nA = "1"\n',
            '[servers.a]\ncommand = "x"\nenabled = false\n'
            '[defaults]\ntimeout_ms = 5\n[servers.a.env]\nA = "1"\n',
        ),
        (  # a header with quotes and spaces, and no newline at the end of the file
            '[ servers . "a" ]  # q\ncommand = "x"',
            '[ servers . "a" ]  # q\ncommand = "x"\nenabled = false\n',
        ),
    ],
)
def test_servers_written_another_way_change_only_there(text: str, after: str) -> None:
    table: dict[str, object] = {"command": "x", "enabled": False}
    if "A = " in text:
        table["env"] = {"A": "1"}
    assert put(text, "a", table) == after


def test_headers_inside_multi_line_strings_are_not_tables() -> None:
    text = (
        '[servers.a]\ncommand = """x"""\nargs = ["""\n[servers.fake]\n""", \'\'\'\n[x]\'\'\']\n\n'
        '[servers.b]\ncommand = "y"\n'
    )
    found = layout.lines(text)
    assert [line.table for line in found if line.kind == "header"] == [("servers", "a"), ("servers", "b")]
    assert drop(text, "a") == '[servers.b]\ncommand = "y"\n'


def test_an_array_of_tables_under_the_name_is_refused_with_the_table_to_paste() -> None:
    text = '[[servers.a]]\ncommand = "x"\n'
    with pytest.raises(edit.Unedited) as refused:
        put(text, "a", {"command": "y"})
    assert refused.value.hint is not None and '[servers.a]\ncommand = "y"\n' in refused.value.hint


def test_a_big_file_changes_in_one_line() -> None:
    text = "".join(
        f'# server {i}\n[servers.s{i}]\ncommand = "cmd"  # c\nargs = ["{i}"]\n\n' for i in range(3000)
    )
    after = put(text, "s1500", {"command": "cmd", "args": ["1500"], "enabled": False})
    assert after == text.replace('args = ["1500"]\n', 'args = ["1500"]\nenabled = false\n')
