"""The [fleet] table: whether serve goes through the fleet, and how long the fleet outlives its
last host. A bad value is a problem said with the file's others, and the built-in value stays."""

from __future__ import annotations

from pathlib import Path

import pytest

from emceepee_cli.config import load_config
from emceepee_cli.config.load import duration_s, fleet_settings
from emceepee_cli.config.model import FleetSettings


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ('"10m"', 600.0),
        ('"30s"', 30.0),
        ('"0"', 0.0),
        ("0", 0.0),
        ('"1.5h"', 5400.0),
        ('"250ms"', 0.25),
        ("45", 45.0),
    ],
)
def test_idle_exit_is_a_duration(tmp_path: Path, written: str, seconds: float) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[fleet]\nidle_exit = {written}\nenabled = true\n")
    config = load_config(path)
    assert config.problems == ()
    assert config.fleet == FleetSettings(enabled=True, idle_exit_s=seconds)
    assert fleet_settings(path) == config.fleet


@pytest.mark.parametrize("written", ['"soon"', '"-1s"', "-5", "true", '"10 minutes"', "nan"])
def test_an_idle_exit_that_is_no_duration_is_a_problem_and_the_default_stays(
    tmp_path: Path, written: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[fleet]\nidle_exit = {written}\n")
    config = load_config(path)
    assert config.fleet == FleetSettings()
    assert [(p.field, p.message.split(" (got")[0]) for p in config.problems] == [
        ("fleet.idle_exit", 'must be a duration like "10m", "30s" or "0"')
    ]


def test_unknown_fleet_keys_and_a_non_boolean_switch_are_problems(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[fleet]\nenabled = "yes"\nidle = "1m"\n')
    config = load_config(path)
    assert config.fleet == FleetSettings()
    assert sorted(str(p.field) for p in config.problems) == ["fleet.enabled", "fleet.idle"]


def test_the_fleet_table_of_a_file_that_is_not_toml_is_the_built_in_one(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[fleet\n")
    assert fleet_settings(path) == FleetSettings()
    assert fleet_settings(tmp_path / "missing.toml") == FleetSettings()


def test_a_duration_is_read_only_from_a_number_or_a_string() -> None:
    assert duration_s(True) is None and duration_s(None) is None and duration_s(["1s"]) is None
    assert duration_s(" 2m ") == 120.0
