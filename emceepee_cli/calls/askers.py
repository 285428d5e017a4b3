"""Which calls a backend's questions hold: the rule that promotes a call to a task because of a
question, and the guess of which call asked a question that came without saying.

A handshake-era backend's question does not say which call it belongs to. It is tied to a call
(`sole`) when no other call can have asked it: the one call in flight on that server, or the one
not already waiting on a question of its own (a call asks one question at a time). Otherwise it
keeps the set of calls that can have asked it. A call is held (`suspended`) by a question tied to
it, or by untied questions when every call that can have asked them surely did; a question another
call asked never holds it, so a fast call beside two parked questions returns inline.
"""

from __future__ import annotations

from emceepee_cli.calls.call import Call
from emceepee_cli.calls.runner import InFlight
from emceepee_cli.questions.questions import Questions


class Askers:
    def __init__(self, questions: Questions, calls: InFlight) -> None:
        self.questions = questions
        self.calls = calls

    def __repr__(self) -> str:
        return f"<Askers calls={len(self.calls)}>"

    def suspended(self, call: Call) -> bool:
        """Blocked on a question of its own for the client: one tied to it, or one of those tied to
        no call when each call that can have asked them surely did (`asking_untied`). A question
        another call asked, or one asked before this call began, never blocks it. A URL parked for
        later (a -32042 error) blocks no call."""
        live = self.questions.live
        own = self.questions.listed(task_id=call.call_id)
        return any(live[q["request_id"]].blocks_call for q in own) or call.call_id in self.asking_untied(
            call.server
        )

    def asking_untied(self, server: str) -> set[str]:
        """The calls on `server` each surely waiting on one of its questions tied to no call: those
        that can have asked them (still in flight, not waiting on a question of their own) when
        they are no more than the questions — a call asks one question at a time, so each has one."""
        free = self.could_ask(server, sole=False)
        untied = [
            calls
            for q in self.questions.live.values()
            if q.row["server"] == server and q.row["task_id"] is None and q.blocks_call
            if not q.forwarding and not q.answered.is_set() and (calls := q.could_ask & free)
        ]
        askers: set[str] = set().union(*untied)
        return askers if len(untied) >= len(askers) else set()

    def question_arrived(self, server: str, task_id: str | None) -> None:
        """Wake whoever waits on the call(s) a new question may block, so the model hears of it now."""
        for call in self.calls.on(server):
            if task_id is None or call.call_id == task_id:
                call.nudge()

    def could_ask(self, server: str, *, sole: bool = True) -> frozenset[str]:
        """The calls that can have asked a handshake-era question `server` asks now: with `sole`,
        the one call in flight there if it is alone; else those not already waiting for an answer
        to a question of their own (a call asks one question at a time)."""
        calls = self.calls.on(server)
        if sole and len(calls) == 1:
            return frozenset([calls[0].call_id])
        live = self.questions.live.values()
        waiting = {q.row["task_id"] for q in live if q.blocks_call and not q.answered.is_set()}
        return frozenset(c.call_id for c in calls if c.call_id not in waiting)
