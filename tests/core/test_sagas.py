"""Saga tokens: signed with the install key, refused when forged, altered or expired; saga steps."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from emceepee_cli import seal
from emceepee_cli.calls import resume
from emceepee_cli.errors import UsageError
from emceepee_cli.questions import sagas
from emceepee_cli.store.records import PendingRow


def question(request_id: str, kind: str = "elicitation", **extra: Any) -> PendingRow:
    params = (
        {"message": "Name?", "requested_schema": {"type": "object", "properties": {"n": {"type": "string"}}}}
        if kind == "elicitation"
        else {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "max_tokens": 5}
    )
    row = PendingRow(
        request_id=request_id,
        instance_id="I",
        server="s",
        kind=kind,
        params=json.dumps(params),
        status="pending",
        task_id="T1",
        correlation="exact",
        input_key=None,
        round=0,
        forwarded=0,
        created_at="t",
        expires_at="t",
        answered_at=None,
        answered_by=None,
        answer=None,
        error=None,
    )
    row.update(extra)  # type: ignore[typeddict-item]  # a settled row's columns, for the history tests
    return row


def test_the_install_key_is_made_once_0600_and_read_back(tmp_path: Path) -> None:
    key = seal.install_key(tmp_path)
    again = seal.install_key(tmp_path)
    mode = stat.S_IMODE(os.stat(tmp_path / seal.KEY_FILE).st_mode)
    assert key == again and len(key) == 32 and mode == 0o600


def test_a_token_names_its_task_and_steps_and_only_this_install_accepts_it(tmp_path: Path) -> None:
    key = seal.install_key(tmp_path)
    token = sagas.sign(key, "T1", ["Q1", "Q2"])
    claims = sagas.verify(key, token)
    body, mac = token.split(".")
    for forged in (f"{body}x.{mac}", f"{body}.{mac[:-2]}AA", body, sagas.sign(b"k" * 32, "T1", ["Q1"])):
        with pytest.raises(UsageError, match="not issued by this emceepee, or was altered"):
            sagas.verify(key, forged)
    assert claims["t"] == "T1" and claims["s"] == ["Q1", "Q2"]


def test_an_expired_token_is_refused_with_how_to_get_a_fresh_one(tmp_path: Path) -> None:
    key = seal.install_key(tmp_path)
    with pytest.raises(UsageError) as expired:
        sagas.verify(key, sagas.sign(key, "T1", ["Q1"], ttl_s=-1))
    assert "expired" in expired.value.message and expired.value.hint and "get_task" in expired.value.hint


def test_a_task_on_questions_is_a_saga_whose_steps_carry_the_exact_request_params(tmp_path: Path) -> None:
    key = seal.install_key(tmp_path)
    view = sagas.view(key, "T1", [question("Q1"), question("Q2", "sampling")])
    sagas.verify(key, view["saga"]["saga_token"])
    elicit, sample = view["saga"]["steps"]
    assert (elicit["type"], elicit["step_id"], sample["type"], sample["step_id"]) == (
        "elicitation",
        "Q1",
        "sampling",
        "Q2",
    )
    assert elicit["params"] == {
        "mode": "form",
        "message": "Name?",
        "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
    }
    assert sample["params"]["maxTokens"] == 5 and sample["params"]["messages"][0]["role"] == "user"
    assert elicit["server"] == "s" and elicit["task_id"] == "T1" and "request_id" not in elicit
    assert sagas.view(key, "T1", []) == {}


def test_a_resume_may_repeat_the_history_but_not_change_it() -> None:
    answered = question(
        "Q1",
        status="accepted",
        answered_by="model",
        answer=json.dumps({"action": "accept", "content": {"n": "a"}}),
    )
    pending = question("Q2")
    rows = [answered, pending]
    planned = sagas.plan(
        "T1", rows, [{"stepId": "Q1", "result": {"n": "a"}}, {"step_id": "Q2", "result": {"n": "b"}}]
    )
    assert [(p.row["request_id"], p.answer) for p in planned] == [
        ("Q2", {"action": "accept", "content": {"n": "b"}})
    ]
    with pytest.raises(
        UsageError, match="already accepted by model with a different answer; nothing was changed"
    ):
        sagas.plan(
            "T1", rows, [{"step_id": "Q2", "result": {"n": "b"}}, {"step_id": "Q1", "result": {"n": "z"}}]
        )
    with pytest.raises(UsageError, match="Step Q9 is not a step of task T1's saga"):
        sagas.plan("T1", rows, [{"step_id": "Q9", "result": {}}])
    refused = sagas.plan(
        "T1", rows, [{"step_id": "Q2", "error": {"code": -1, "message": "no", "data": {"x": 1}}}]
    )
    assert refused[0].error == {"code": -1, "message": "no", "data": {"x": 1}}
    assert sagas.plan("T1", rows, [{"step_id": "Q2", "error": "no"}])[0].error == {
        "code": -32603,
        "message": "no",
    }


def test_saga_and_resume_tokens_are_not_interchangeable(tmp_path: Path) -> None:
    key = seal.install_key(tmp_path)
    saga = sagas.sign(key, "T1", ["Q1"])
    ours = seal.sign_resume(key, "T1", "s", "t", {}, time.time() + 60)
    with pytest.raises(UsageError, match="did not issue it"):
        resume.verify(key, saga)
    with pytest.raises(UsageError, match="saga_token was not issued"):
        sagas.verify(key, ours)
    with pytest.raises(UsageError, match="saga_token was not issued"):
        sagas.verify(key, ours.removeprefix(resume.PREFIX))  # the prefix is signed too
    assert resume.verify(key, ours)["t"] == "T1"
