"""emceepee://diagrams is generated from the state tables the code uses."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from emceepee_cli.calls.call import CALL_TRANSITIONS
from emceepee_cli.calls.stops import STOPS, Stop
from emceepee_cli.store.records import (
    ELICITATION_TRANSITIONS,
    SAMPLING_TRANSITIONS,
    TASK_TRANSITIONS,
    TaskStatus,
)
from tests.support import emceepee, text_of, write_config

pytestmark = pytest.mark.anyio


async def test_the_diagrams_resource_shows_every_state_and_transition(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", "")
    async with emceepee(config) as client:
        with anyio.fail_after(10):
            listed = await client.list_resources()
            read = await client.read_resource("emceepee://diagrams")
    assert [r.uri for r in listed.resources] == ["emceepee://diagrams"]
    diagrams = {d["name"]: d for d in json.loads(text_of(read.contents[0]))["diagrams"]}
    assert set(diagrams) == {
        "task_states",
        "call_states",
        "elicitation_states",
        "sampling_states",
        "tool_call_lifecycle",
        "chain_loop",
        "entities",
    }
    for name, table in (
        ("task_states", TASK_TRANSITIONS),
        ("call_states", CALL_TRANSITIONS),
        ("elicitation_states", ELICITATION_TRANSITIONS),
        ("sampling_states", SAMPLING_TRANSITIONS),
    ):
        mermaid = diagrams[name]["mermaid"]
        assert mermaid.startswith("stateDiagram-v2")
        for old, moves in table.items():
            for new in moves:
                assert f"{old.value} --> {new.value}" in mermaid
    assert f"{TaskStatus.INTERRUPTED.value} --> [*]" in diagrams["task_states"]["mermaid"]
    loop = diagrams["chain_loop"]["mermaid"]
    assert loop.startswith("flowchart TD") and all(reason in loop for reason in STOPS)


def test_a_chain_stops_only_for_a_reason_the_diagram_draws() -> None:
    assert Stop("cycle", "Not called: …").reason == "cycle"
    with pytest.raises(ValueError, match="not a reason a chain stops for"):
        Stop("tired", "Not called: …")
