"""Saga tokens: signed with the install key, refused when forged, altered or expired."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from emceepee_cli.core import sagas
from emceepee_cli.errors import UsageError
from emceepee_cli.store.records import QuestionJson


def question(request_id: str, kind: str = "elicitation") -> QuestionJson:
    return QuestionJson(
        request_id=request_id,
        server="s",
        kind=kind,
        correlation="exact",
        status="pending",
        created_at="t",
        expires_at="t",
    )


def test_the_install_key_is_made_once_0600_and_read_back(tmp_path: Path) -> None:
    key = sagas.install_key(tmp_path)
    again = sagas.install_key(tmp_path)
    mode = stat.S_IMODE(os.stat(tmp_path / sagas.KEY_FILE).st_mode)
    assert key == again and len(key) == 32 and mode == 0o600


def test_a_token_names_its_task_and_steps_and_only_this_install_accepts_it(tmp_path: Path) -> None:
    key = sagas.install_key(tmp_path)
    token = sagas.sign(key, "T1", ["Q1", "Q2"])
    claims = sagas.verify(key, token)
    body, mac = token.split(".")
    for forged in (f"{body}x.{mac}", f"{body}.{mac[:-2]}AA", body, sagas.sign(b"k" * 32, "T1", ["Q1"])):
        with pytest.raises(UsageError, match="not issued by this emceepee, or was altered"):
            sagas.verify(key, forged)
    assert claims["t"] == "T1" and claims["s"] == ["Q1", "Q2"]


def test_an_expired_token_is_refused_with_how_to_get_a_fresh_one(tmp_path: Path) -> None:
    key = sagas.install_key(tmp_path)
    with pytest.raises(UsageError) as expired:
        sagas.verify(key, sagas.sign(key, "T1", ["Q1"], ttl_s=-1))
    assert "expired" in expired.value.message and expired.value.hint and "get_task" in expired.value.hint


def test_a_task_on_questions_is_a_saga_whose_steps_are_checked(tmp_path: Path) -> None:
    key = sagas.install_key(tmp_path)
    view = sagas.view(key, "T1", [question("Q1"), question("Q2", "sampling")])
    claims = sagas.verify(key, view["saga"]["saga_token"])
    sagas.check_steps(claims, [{"step_id": "Q2"}])
    with pytest.raises(UsageError, match="Step Q3 is not one of this saga's steps"):
        sagas.check_steps(claims, [{"step_id": "Q1"}, {"step_id": "Q3"}])
    assert [(s["type"], s["step_id"]) for s in view["saga"]["steps"]] == [
        ("elicitation", "Q1"),
        ("sampling", "Q2"),
    ]
    assert view["saga"]["state"] == "suspended" and claims["s"] == ["Q1", "Q2"]
    assert sagas.view(key, "T1", []) == {}
