"""What a chain (calls/chain.py) asks of the tasks, for one call: run a request, ask an approval,
journal the steps and the resume token.

One request of a step: a handshake-era backend answers it with a result; a 2026-07-28 backend may
first answer with input rounds, each parked as questions (calls/input_rounds.py) and then sent again
with the answers, until it gives a result.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession

from emceepee_cli.backends.backend import Backend
from emceepee_cli.calls import backend_tasks, end, raw_step, resume
from emceepee_cli.calls.call import Call, CallState
from emceepee_cli.calls.chain import Step
from emceepee_cli.calls.input_rounds import Reply, Round, Rounds, until_result
from emceepee_cli.calls.recorder import Recorder
from emceepee_cli.questions.questions import Questions
from emceepee_cli.shared import Shared
from emceepee_cli.store.records import Kind, PendingRow, StepRow

SHOWN_ARGS_CHARS = 500
EMPTY_FORM = {"type": "object", "properties": {}}


class Stepper:
    def __init__(
        self,
        call: Call,
        backend: Backend,
        shared: Shared,
        *,
        questions: Questions,
        rounds: Rounds,
        recorder: Recorder,
        resume_round: Round | None = None,
    ) -> None:
        self.call = call
        self.backend = backend
        self.journal = shared.journal
        self.runtime = shared.runtime
        self.ready_wait_s = shared.defaults.max_wait_ms / 1000  # a resumed round's backend, still starting
        self.questions = questions
        self.rounds = rounds
        self.recorder = recorder
        self.resume_round = resume_round
        self.steps: list[Step] = []

    def __repr__(self) -> str:
        return f"<Stepper {self.call!r} steps={len(self.steps)}>"

    async def call_step(self, step: Step, token: str | None) -> tuple[types.CallToolResult, str | None]:
        """Call the step's tool; for a 2026-07-28 backend, answer its input rounds until it returns
        (calls/input_rounds.py): each round's questions parked, the round journaled."""
        state: str | None = None
        responses: types.InputResponses | None = None
        number = 0
        if self.resume_round is not None:  # adopted after a restart: its last round's answers, then again
            state, number = self.resume_round.request_state, self.resume_round.number
            responses = await self.rounds.collect(self.resume_round.asked)
            self.resume_round = None
            await self.backend.wait_ready(self.ready_wait_s)
        in_arguments = resume.declares_token(self.backend.offer.tools.get(step.tool))

        async def send(responses: types.InputResponses | None, state: str | None) -> Reply:
            request = functools.partial(self._send, step, token, in_arguments, responses, state)
            return await self.backend.request(f"tools/call '{step.tool}'", request)

        answer = functools.partial(self.rounds.answer, self.call, promote=self.recorder.promote)
        return await until_result(send, answer, state=state, responses=responses, number=number)

    async def _send(
        self,
        step: Step,
        token: str | None,
        in_arguments: bool,
        responses: types.InputResponses | None,
        state: str | None,
        session: ClientSession,
    ) -> tuple[types.CallToolResult | types.InputRequiredResult, str | None]:
        progress = functools.partial(self.recorder.progress, self.call)
        if self.call.fast and step.n == 1 and token is None and responses is None and state is None:
            exchanges = raw_step.exchanges_for(self.backend, step.tool)
            if exchanges is not None:  # the call's first request, raw (calls/raw_step.py)
                return await raw_step.send(self.call, exchanges, session, step.tool, step.args, progress)
        if backend_tasks.runs_as_task(self.backend, step.tool):  # it refuses a plain call
            ttl_s = self.call.ttl_s
            result = await backend_tasks.call(self.backend, session, step.tool, step.args, ttl_s, progress)
            return result, resume.backend_token(result.model_dump(by_alias=True, exclude_none=True))
        return await resume.call_tool_raw(
            session,
            step.tool,
            step.args,
            token=token,
            in_arguments=in_arguments,
            responses=responses,
            state=state,
            progress=progress,
        )

    async def approve(self, step: Step, reason: str, by: tuple[str, ...]) -> PendingRow:
        """Ask whether the step may run (`by`: who may accept; anyone may decline); its question's
        settled row."""
        shown = json.dumps(step.args or {}, ensure_ascii=False)
        if len(shown) > SHOWN_ARGS_CHARS:
            shown = shown[:SHOWN_ARGS_CHARS] + "…"
        message = (
            f"Allow {self.call.server}.{step.tool}({shown})? It needs approval: {reason}. "
            "Accept to run it, decline to skip it."
        )
        approval: dict[str, Any] = {"tool": step.tool, "arguments": step.args or {}, "reason": reason}
        approval["step"], approval["by"] = step.n, list(by)
        question = await self.questions.ask(
            self.call.server,
            Kind.ELICITATION,
            {"mode": "form", "message": message, "requested_schema": EMPTY_FORM},
            task_id=self.call.call_id,
            correlation="exact",
            purpose="approval",
            approval=approval,
        )
        return await self.questions.wait(question)

    async def keep(self) -> None:
        await self.recorder.promote(self.call)

    async def record(self) -> None:
        """Journal the steps that changed, once the call is a task (before, nothing is kept)."""
        call = self.call
        if call.state == CallState.RUNNING or not call.row_written.is_set() or call.unjournaled:
            return
        dirty = [s for s in self.steps if s.dirty]
        if not dirty:
            return
        for step in dirty:
            step.dirty = False
        rows = [self._row(s) for s in dirty]
        with anyio.CancelScope(shield=True):
            await self.runtime.guarded(lambda: self.journal.run(self.journal.sync.steps.put, rows))

    def _row(self, step: Step) -> StepRow:
        """The step's row; a raw result (calls/raw_step.py) is the task's, journaled once with the
        task (store/tables/results.py): its step row keeps none (store/tables/steps.py)."""
        row, raw = step.row(self.call.call_id), end.preview(self.call.end)
        if step.n == 1 and raw is not None and step.finished_at is not None:
            row["result"], row["text"] = None, raw
        return row

    async def write_ahead(self, token: str, auto: bool) -> None:
        if self.call.promoted and not self.call.unjournaled:
            task_id = self.call.call_id
            with anyio.CancelScope(shield=True):
                await self.runtime.guarded(
                    lambda: self.journal.run(self.journal.sync.tasks.set_resume, task_id, token, auto)
                )
