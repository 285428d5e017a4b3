"""Values that `${VAR}` expanded to read as `${VAR}` again wherever emceepee quotes them."""

from __future__ import annotations

import json
import logging
import os

from emceepee_cli import redact
from emceepee_cli.config import ServerSpec

SECRET = "tok-" + os.urandom(8).hex()


def test_expanding_a_spec_registers_each_value_and_redact_shows_its_reference() -> None:
    spec = ServerSpec("s", command="x", cwd="/srv/${R_DIR}/app", env={"T": "Bearer ${R_TOKEN}"})
    spec.expanded({"R_DIR": "private-" + SECRET, "R_TOKEN": SECRET})
    said = f"Working directory '/srv/private-{SECRET}/app' does not exist; header Bearer {SECRET}"
    assert (
        redact.redact(said)
        == "Working directory '/srv/${R_DIR}/app' does not exist; header Bearer ${R_TOKEN}"
    )


def test_redact_data_reaches_nested_values_and_keys_and_leaves_other_types() -> None:
    ServerSpec("s", command="x", args=("${R_DATA}",)).expanded({"R_DATA": SECRET + "-data"})
    data = {"a": [f"x{SECRET}-data", 1, None, True], SECRET + "-data": {"b": (SECRET + "-data",)}}
    assert redact.redact_data(data) == {"a": ["x${R_DATA}", 1, None, True], "${R_DATA}": {"b": ["${R_DATA}"]}}


def test_escaped_spellings_of_a_value_are_redacted_too() -> None:
    value = 'q"uo\\te-' + SECRET + "-é"
    ServerSpec("s", command="x", env={"E": "${R_ESCAPED}"}).expanded({"R_ESCAPED": value})
    for spelling in (json.dumps(value), json.dumps(value, ensure_ascii=False), repr(value)):
        assert SECRET not in redact.redact(spelling), spelling


def test_short_values_are_not_treated_as_secrets() -> None:
    ServerSpec("s", command="x", env={"D": "${R_DEBUG}", "P": "${R_PORT}"}).expanded(
        {"R_DEBUG": "1", "R_PORT": "8080"}
    )
    assert redact.redact("task 01J8080 at level 1") == "task 01J8080 at level 1"


def test_the_log_formatter_redacts_the_message_its_arguments_and_the_traceback() -> None:
    ServerSpec("s", command="x", env={"L": "${R_LOGGED}"}).expanded({"R_LOGGED": SECRET + "-log"})
    formatter = redact.RedactingFormatter("%(message)s")
    exc = ValueError(f"failed with {SECRET}-log")
    record = logging.LogRecord(
        "t", logging.ERROR, __file__, 1, "saw %s", (SECRET + "-log",), (type(exc), exc, None)
    )
    out = formatter.format(record)
    assert SECRET not in out and out.count("${R_LOGGED}") == 2
