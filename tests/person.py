"""A person at a terminal: `emceepee answer ID` on a real pseudo-terminal, answered by typing."""

from __future__ import annotations

from tests.support import Terminal


def approve_at_terminal(request_id: str, reply: str = "y") -> str:
    """Run `emceepee answer ID` on a pseudo-terminal, wait for the y/N question, type `reply`;
    everything the terminal showed up to the question."""
    term = Terminal("answer", request_id)
    shown = term.expect("Allow? [y/N] ")
    term.type(reply)
    outcome = "accepted" if reply == "y" else "declined"
    term.expect(f"Answered {request_id} ({outcome})")
    assert term.finish() == 0, term.text
    return shown
