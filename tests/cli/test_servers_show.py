"""`servers show` prints values as the config writes them and each problem on a line of its own;
`servers list` prints the config's problems once per change of the file, not at every listing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.clirun import cli
from tests.support import write_config

BROKEN = """[servers.bad]
command = "python3"
args = ["-c", "raise SystemExit('it failed')"]
env = { X = "${NOPE_UNSET_VAR}" }
"""
UNKNOWN_KEY = '[servers.weird]\ncommand = "python3"\nfoo = 1\n'
GOOD = '[servers.good]\ncommand = "python3"\nargs = ["-V"]\nenabled = false\n'


def test_show_prints_each_problem_on_its_own_line_and_values_as_json(tmp_path: Path) -> None:
    config = str(write_config(tmp_path / "config.toml", BROKEN, GOOD))
    bad = cli("servers", "show", "bad", "--config", config)
    good = cli("servers", "show", "good", "--config", config)
    lines = bad.out.splitlines()
    assert bad.code == 0 and good.code == 0, bad.err + good.err
    assert """args:           ["-c", "raise SystemExit('it failed')"]""" in lines
    assert 'env:            {"X": "${NOPE_UNSET_VAR}"}' in lines
    problem = lines[lines.index("problems:") + 1]
    assert problem.startswith("  - ") and "${NOPE_UNSET_VAR} is not set" in problem
    assert "'\"'\"'" not in bad.out  # no shell quoting of sentences
    assert "enabled:        false" in good.out.splitlines() and "True" not in good.out + bad.out
    assert 'args:           ["-V"]' in good.out.splitlines()


def test_show_json_is_unchanged_by_the_text_layout(tmp_path: Path) -> None:
    config = str(write_config(tmp_path / "config.toml", BROKEN))
    shown = json.loads(cli("servers", "show", "bad", "--config", config, "--json").out)["server"]
    assert shown["enabled"] is True and shown["args"] == ["-c", "raise SystemExit('it failed')"]
    assert len(shown["problems"]) == 1


def test_list_prints_the_configs_problems_once_per_change_of_the_file(tmp_path: Path) -> None:
    path = write_config(tmp_path / "config.toml", BROKEN, UNKNOWN_KEY, GOOD)
    config = str(path)
    first = cli("servers", "list", "--config", config)
    second = cli("servers", "list", "--config", config)
    switched = cli("servers", "enable", "good", "--config", config)  # about 'good' only
    third = cli("servers", "list", "--config", config)  # the file changed: said again
    fourth = cli("servers", "list", "--config", config)
    unset = cli("servers", "list", "--config", config, env={"NOPE_UNSET_VAR": "set now"})
    as_json = cli("servers", "list", "--config", config, "--json").json()
    assert first.code == second.code == third.code == 0
    assert "NOPE_UNSET_VAR" in first.err and "unknown field" in first.err
    assert "NOPE_UNSET_VAR" not in second.err and "2 problem(s) in the config, printed before" in second.err
    assert "weird" in second.out and "invalid" in second.out  # the table still says which are broken
    assert switched.code == 0 and switched.err == ""
    assert "NOPE_UNSET_VAR" in third.err and "printed before" in fourth.err
    assert "NOPE_UNSET_VAR" not in unset.err and "unknown field" in unset.err  # its problems changed
    assert len([p for s in as_json["servers"] for p in s.get("problems", [])]) == 2  # --json: always all


def test_a_data_folder_that_cannot_be_written_means_the_problems_are_printed_every_time(
    tmp_path: Path, emceepee_home: Path
) -> None:
    config = str(write_config(tmp_path / "config.toml", UNKNOWN_KEY))
    emceepee_home.mkdir(parents=True, exist_ok=True)
    (emceepee_home / "data").write_text("a file where the data folder should be")
    first = cli("servers", "list", "--config", config)
    second = cli("servers", "list", "--config", config)
    assert first.code == second.code == 0
    assert "unknown field" in first.err and "unknown field" in second.err
