"""Tables readable at 80 and 50 columns on a terminal, and plain and complete in a pipe."""

from __future__ import annotations

import os
from pathlib import Path

from emceepee_cli.cli.terminal import layout
from tests.cli.clirun import cli
from tests.support import Terminal, write_config

COLUMNS = ["id", "status", "server", "tool", "created", "detail"]
ROWS = [
    [
        "01JB2C3D4E5F6G7H8J9KAMNPQR",
        "completed",
        "github",
        "search_repositories",
        "2026-11-22T18:00:00.000Z",
        "the backend returned a result after a long while, with plenty of words to wrap",
    ],
    ["01JB2C3D4E5F6G7H8J9KAMNPQS", "interrupted", "fs", "read_file", "2026-11-22T18:01:00.000Z", ""],
]


def words(lines: list[str]) -> set[str]:
    return {w for line in lines for w in line.replace(":", " ").split()}


def test_in_a_pipe_every_cell_is_whole_on_its_row() -> None:
    shown = layout.table(COLUMNS, ROWS, None)
    assert not shown.records and len(shown.lines) == 3
    assert all(
        all(cell in line for cell in row if cell) for line, row in zip(shown.lines[1:], ROWS, strict=True)
    )


def test_at_80_columns_long_cells_wrap_and_ids_and_statuses_stay_whole() -> None:
    shown = layout.table(COLUMNS, ROWS, 80)
    assert all(len(line) <= 80 for line in shown.lines)
    assert {"01JB2C3D4E5F6G7H8J9KAMNPQR", "completed", "interrupted", "search_repositories"} <= words(
        shown.lines
    )


def test_at_50_columns_rows_become_label_value_blocks_not_one_letter_lines() -> None:
    shown = layout.table(COLUMNS, ROWS, 50)
    assert shown.records and all(len(line) <= 50 for line in shown.lines)
    assert "status:  completed" in shown.lines
    assert "id:      01JB2C3D4E5F6G7H8J9KAMNPQR" in shown.lines
    assert min(len(line.strip()) for line in shown.lines if line.strip()) > 3
    assert words(["\n".join(row) for row in ROWS]) <= words(shown.lines)


def test_a_newline_in_a_cell_keeps_the_row_on_one_line() -> None:
    shown = layout.table(["a", "b"], [["x", "two\nlines"]], None)
    assert shown.lines == ["a  b", "x  two⏎lines"]


def test_servers_list_in_a_pipe_shows_each_server_whole(tmp_path: Path) -> None:
    long = "--" + "x" * 150
    config = write_config(tmp_path / "my.toml", f'[servers.wide]\ncommand = "cmd"\nargs = ["{long}"]\n')
    done = cli("servers", "list", "--config", str(config))
    assert done.code == 0
    assert f"wide  enabled  stdio      cmd {long}" in done.out.splitlines()


def test_servers_list_on_a_50_column_terminal_fits_it(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "my.toml",
        '[servers.wide]\ncommand = "some-command"\nargs = ["--with", "several", "arguments"]\n',
    )
    term = Terminal("servers", "list", "--config", str(config), env={**os.environ, "COLUMNS": "50"})
    assert term.finish() == 0
    lines = [line for line in term.text.splitlines() if line.strip()]
    assert all(len(line) <= 50 for line in lines[1:]), lines  # the title is the config's path
    assert "some-command --with several arguments" in " ".join(" ".join(lines).split())


def test_a_path_too_long_for_its_wrapped_column_is_shown_whole_as_records() -> None:
    path = "/home/someone/.local/venvs/tool/bin/mcp-server-git"  # 50 characters
    assert len(path) == 50
    shown = layout.table(["name", "status", "target"], [["git", "enabled", f"{path} --repository ~/src"]], 60)
    assert shown.records and any(path in line for line in shown.lines)
    assert all(len(line) <= 60 for line in shown.lines)


def test_a_record_leaves_out_an_empty_cell() -> None:
    shown = layout.table(["id", "detail"], [["01A", ""], ["01B", "a-long-unbreakable-word-" * 3]], 30)
    assert shown.records and "detail:" not in shown.lines[: shown.lines.index("")]
    assert shown.lines[0] == "id: 01A" and "id:     01B" in shown.lines
