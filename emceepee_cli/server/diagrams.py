"""The `emceepee://diagrams` resource: mermaid diagrams generated from the code's own states.

The state diagrams are built from the transition tables in `store.records`, so they cannot
drift from what the code does; the lifecycle and entity diagrams name those same states.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from emceepee_cli.calls.call import CALL_TRANSITIONS, CallState
from emceepee_cli.calls.stops import STOPS
from emceepee_cli.store.records import (
    ELICITATION_TRANSITIONS,
    SAMPLING_TRANSITIONS,
    TASK_TRANSITIONS,
    ElicitationStatus,
    SamplingStatus,
    TaskStatus,
)

URI = "emceepee://diagrams"


def state_diagram(states: type[StrEnum], transitions: dict[Any, dict[Any, str]]) -> str:
    first = next(iter(states))
    lines = ["stateDiagram-v2", f"    [*] --> {first.value}"]
    for old, moves in transitions.items():
        for new, why in moves.items():
            lines.append(f"    {old.value} --> {new.value}: {why}")
    lines += [f"    {s.value} --> [*]" for s in states if s not in transitions]
    return "\n".join(lines)


def lifecycle() -> str:
    return "\n".join(
        [
            "sequenceDiagram",
            "    participant Host",
            "    participant emceepee",
            "    participant Backend",
            "    Host->>emceepee: execute_tool(server, tool, args, timeout_ms)",
            "    emceepee->>emceepee: validate args against the tool's input schema",
            "    emceepee->>Backend: tools/call (runs in emceepee's task group)",
            "    alt result within timeout_ms",
            "        Backend-->>emceepee: result",
            "        emceepee-->>Host: the backend's result, unchanged (no task)",
            "    else still running",
            f"        emceepee-->>Host: proxy_task ({TaskStatus.WORKING.value}) + pending_on_server",
            "        Backend-->>emceepee: result, later",
            f"        emceepee->>emceepee: journal: {TaskStatus.COMPLETED.value}; event task_status",
            "        Host->>emceepee: get_task_result(task_id) or await_activity",
            "        emceepee-->>Host: the backend's result",
            "    end",
        ]
    )


def chain_loop() -> str:
    """One call's steps: approval, resumes, and each suggested next tool, until it stops (and why)."""

    def edge(source: str, label: str, target: str) -> str:
        return f'    {source} -->|"{label}"| {target}'

    lines = [
        "flowchart TD",
        '    start(["execute_tool"]) --> approval{"needs approval?"}',
        edge("approval", "declined or expired", 'not_called(["its result: called = false"])'),
        edge("approval", "no, or accepted", 'call["tools/call to the backend"]'),
        '    call --> token{"nextResumeToken?"}',
        edge("token", "auto_resume, under auto_resume_limit", "call"),
        edge("token", "yes, not resumed: resumable block; in a chain, resumable_step", "stopped"),
        edge("token", "no", 'suggestion{"_meta.nextTool?"}'),
        edge("suggestion", "no", 'done(["the last result, with tool_chain if it chained"])'),
        edge("suggestion", "yes", 'checks{"its checks, in order"}'),
        edge("checks", "all pass, approved if it must be", "call"),
    ]
    lines += [
        edge("checks", f"{reason}: {why}", "stopped")
        for reason, why in STOPS.items()
        if reason != "resumable_step"
    ]
    lines.append('    stopped(["the last result + tool_chain.stopped"])')
    return "\n".join(lines)


def entities() -> str:
    return "\n".join(
        [
            "erDiagram",
            "    INSTANCE ||--o{ TASK : owns",
            "    INSTANCE ||--o{ EVENT : emits",
            "    INSTANCE ||--o{ PENDING_REQUEST : owns",
            "    SERVER ||--o{ TASK : runs",
            "    SERVER ||--o{ PENDING_REQUEST : asks",
            '    TASK |o--o{ PENDING_REQUEST : "caused (exact or sole correlation)"',
            '    HOST_SESSION ||--|| INSTANCE : "is served by"',
            '    HOST_SESSION ||--o{ EVENT : "receives once"',
        ]
    )


def diagrams() -> dict[str, Any]:
    return {
        "diagrams": [
            {
                "name": "task_states",
                "description": "States of a task (a tool call promoted after its wait).",
                "mermaid": state_diagram(TaskStatus, TASK_TRANSITIONS),
            },
            {
                "name": "elicitation_states",
                "description": "States of a pending elicitation from a backend.",
                "mermaid": state_diagram(ElicitationStatus, ELICITATION_TRANSITIONS),
            },
            {
                "name": "sampling_states",
                "description": "States of a pending sampling request from a backend.",
                "mermaid": state_diagram(SamplingStatus, SAMPLING_TRANSITIONS),
            },
            {
                "name": "call_states",
                "description": "States of one execute_tool call in the serve process that runs it.",
                "mermaid": state_diagram(CallState, CALL_TRANSITIONS),
            },
            {
                "name": "tool_call_lifecycle",
                "description": "An execute_tool call, answered in time or promoted.",
                "mermaid": lifecycle(),
            },
            {
                "name": "chain_loop",
                "description": "One call's steps: its approval, resumes, and the tools results suggest.",
                "mermaid": chain_loop(),
            },
            {
                "name": "entities",
                "description": "What the journal holds and how it relates.",
                "mermaid": entities(),
            },
        ]
    }
