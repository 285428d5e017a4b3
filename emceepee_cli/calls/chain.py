"""The steps of one call: chained tools (`_meta.nextTool`), automatic resumes, approvals.

A chain is one call (one `Call`, one task id, one cancel scope, one TTL). Each result may
suggest the next tool on the same backend, as tool-chaining metadata. A suggestion is followed
only after every check a direct call gets, in this order; the first that fails stops the chain:

    not_followed        follow_next_tool is off (per call, per server, [defaults])
    malformed_suggestion the suggestion is not {tool: str, arguments?: object}, or is huge
    denied              tools.allow / tools.deny (calls/policy.py)
    unknown_tool        the backend does not list it (after one fresh listing)
    invalid_arguments   the arguments fail the tool's input schema
    cycle               the same (tool, arguments) was already called in this chain
    depth_limit         max_chain_depth calls in all, the first included, were made
    approval_declined   an approval (confirm, confirm_destructive) was declined; or expired

`denied`, `unknown_tool` and `invalid_arguments` are the admission rule every call passes
(calls/admission.py), said as a stop. The reasons, and the result of a call whose approval was
declined, are calls/stops.py; how a suggestion is read and shown, calls/suggestion.py.

A stop is never silent: the host gets the last result, untouched, plus one text block
`{"tool_chain": {steps, stopped}}` saying why, what was suggested and how to make the call.

A result carrying a backend's `nextResumeToken` is resumed in place when auto_resume is on (up to
auto_resume_limit re-issues, auto_resume_interval_ms apart), else handed back with a
`{"resumable": …}` block that shows the token; in a chain such a step stops it
(`resumable_step`). A call with more than one result is journaled as a task, each result a row
of `task_steps`, so every earlier result can be read with `get_task`.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import mcp_types as types

from emceepee_cli.backends.backend import Backend
from emceepee_cli.calls import admission, policy
from emceepee_cli.calls.policy import Follow
from emceepee_cli.calls.stops import Stop, not_called
from emceepee_cli.calls.suggestion import brief, canonical, compact, how, shape, shown, suggestion_of
from emceepee_cli.clock import now_iso
from emceepee_cli.config import Defaults, ServerSpec
from emceepee_cli.store.records import PendingRow, StepRow
from emceepee_cli.store.unreadable import UnreadableRow

TEXT_CHARS = 200


@dataclass(eq=False)
class Step:
    """One result of the call: its first call, a chained call, or a resume of either."""

    n: int
    kind: str  # call | chain | resume
    tool: str
    args: dict[str, Any] | None
    outcome: str = "working"  # ok | tool_error | working | failed | cancelled | approval_declined
    result: types.CallToolResult | None = None
    token: str | None = None  # the backend's nextResumeToken in this result
    started_at: str = field(default_factory=now_iso)
    finished_at: str | None = None
    dirty: bool = True  # changed since it was last journaled

    def finish(self, result: types.CallToolResult, token: str | None) -> None:
        self.result, self.token = result, token
        self.outcome = "tool_error" if result.is_error else "ok"
        self.finished_at, self.dirty = now_iso(), True

    @property
    def text(self) -> str:
        if self.result is None:
            return ""
        first = next((b.text for b in self.result.content if isinstance(b, types.TextContent)), "")
        return first[:TEXT_CHARS]

    def trace(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.n, "tool": self.tool, "arguments": self.args or {}}
        if self.kind == "resume":
            out["resumed"] = True
        return {**out, "outcome": self.outcome, "text": self.text}

    def row(self, task_id: str) -> StepRow:
        return StepRow(
            task_id=task_id,
            step=self.n,
            kind=self.kind,
            tool=self.tool,
            args=json.dumps(self.args),
            outcome=self.outcome,
            text=self.text,
            result=self.result.model_dump_json(by_alias=True, exclude_none=True) if self.result else None,
            resume_token=self.token,
            started_at=self.started_at,
            finished_at=self.finished_at,
        )

    @classmethod
    def from_row(cls, row: StepRow) -> Step:
        """The step a journal row holds; `UnreadableRow` if its JSON does not decode (a damaged row)."""
        try:
            result = types.CallToolResult.model_validate_json(row["result"]) if row["result"] else None
            args = json.loads(row["args"] or "null")
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise UnreadableRow(f"step {row['step']} of task {row['task_id']}", exc) from exc
        step = cls(row["step"], row["kind"], row["tool"], args)
        step.outcome, step.result, step.token = row["outcome"], result, row["resume_token"]
        step.started_at, step.finished_at, step.dirty = row["started_at"], row["finished_at"], False
        return step


class Hooks(Protocol):
    """What a chain needs from the tasks: run one request, ask an approval, journal."""

    async def call_step(self, step: Step, token: str | None) -> tuple[types.CallToolResult, str | None]: ...
    async def approve(self, step: Step, reason: str, by: tuple[str, ...]) -> PendingRow: ...
    async def keep(self) -> None: ...  # journal the call as a task (it has more than one result)
    async def record(self) -> None: ...  # journal the steps that changed
    async def write_ahead(self, token: str, auto: bool) -> None: ...  # the token the next request carries


@dataclass(eq=False)
class Chain:
    task_id: str
    server: str
    backend: Backend
    defaults: Defaults
    follow: Follow
    hooks: Hooks
    steps: list[Step] = field(default_factory=list[Step])
    stopped: Stop | None = None
    suggested: bool = False  # some result suggested a next tool
    resumes: int = 0

    @property
    def spec(self) -> ServerSpec:
        return self.backend.spec

    @property
    def calls(self) -> list[Step]:
        """The steps that were calls of their own (not resumes of one)."""
        return [s for s in self.steps if s.kind != "resume"]

    def restore(self, steps: list[Step]) -> None:
        """An adopted call's steps so far, read back from the journal."""
        self.steps[:] = steps  # the same list the hooks journal
        self.resumes = sum(1 for s in steps if s.kind == "resume")
        self.suggested = len(self.calls) > 1

    # ---- the loop ------------------------------------------------------------------------

    async def run(
        self, tool: str, args: dict[str, Any] | None, token: str | None = None
    ) -> types.CallToolResult:
        """The call's first step (approved first if it must be), then every step it leads to."""
        first = Step(len(self.steps) + 1, "call", tool, args)
        reason = policy.approval_reason(self.spec, self.defaults, await self.backend.tool(tool))
        if reason is not None:
            row = await self.hooks.approve(first, reason, policy.approvers(self.spec, self.defaults))
            if row["status"] != "accepted":
                first.outcome = "approval_declined"
                return not_called(self.server, tool, args, row)
        return await self.go_on(first, token)

    async def go_on(self, step: Step, token: str | None) -> types.CallToolResult:
        while True:
            result = await self._settled(step, token)
            token = None
            if self.stopped is not None:
                break
            following = await self._next(result, step)
            if following is None:
                break
            step = following
        return self.deliver(result)

    async def _settled(self, step: Step, token: str | None) -> types.CallToolResult:
        """Run one step; with auto_resume, re-issue it until its result carries no token."""
        while True:
            if len(self.steps) >= 1:
                await self.hooks.keep()
            self.steps.append(step)
            await self.hooks.record()
            result, next_token = await self.hooks.call_step(step, token)
            step.finish(result, next_token)
            await self.hooks.record()
            if next_token is None:
                return result
            if not self.follow.auto_resume or self.resumes >= self.follow.auto_resume_limit:
                await self.hooks.write_ahead(next_token, False)
                if suggestion_of(result) is not None:
                    self.suggested = True
                    self.stopped = self._resumable_stop(step, result)
                return result
            await self.hooks.keep()  # from here on, a restart must find the token in the task row
            await self.hooks.write_ahead(next_token, True)
            await anyio.sleep(self.follow.auto_resume_interval_ms / 1000)
            self.resumes += 1
            step, token = Step(len(self.steps) + 1, "resume", step.tool, step.args), next_token

    def _resumable_stop(self, step: Step, result: types.CallToolResult) -> Stop:
        raw = suggestion_of(result)
        suggested = raw[1] if raw is not None and isinstance(raw[1], dict) else None
        return Stop(
            "resumable_step",
            f"Not followed: step {step.n} ({step.tool}) returned a partial result with a resume token; "
            "resume it first (see the resumable block), then make the suggested call if still wanted.",
            shown(suggested) if suggested is not None else None,
        )

    async def _next(self, result: types.CallToolResult, step: Step) -> Step | None:
        """The next step this result leads to, or None (with `stopped` set when one was refused)."""
        raw = suggestion_of(result)
        if raw is None:
            return None
        self.suggested = True
        key, value = raw
        if not self.follow.follow_next_tool:
            self.stopped = Stop(
                "not_followed",
                "Not called: follow_next_tool is off; make the suggested call yourself if it is wanted.",
                shown(value) if isinstance(value, dict) else None,
            )
            return None
        tool, args = shape(value)
        if tool is None:
            self.stopped = Stop(
                "malformed_suggestion",
                f"Not called: the backend's _meta[{key!r}] is not {{tool, arguments?}}: {brief(value)}",
                how=False,
            )
            return None
        self.stopped = await self._refusal(tool, args)
        return None if self.stopped else Step(len(self.steps) + 1, "chain", tool, args)

    async def _refusal(self, tool: str, args: dict[str, Any]) -> Stop | None:
        """Why the suggested call may not be made (None: it may), approval included."""
        suggested = shown({"tool": tool, "arguments": args})
        verdict = await admission.admit(self.backend, tool, args)
        if not isinstance(verdict, admission.Admitted):
            return self._refused(verdict, suggested)
        earlier = next(
            (s for s in self.calls if (s.tool, canonical(s.args)) == (tool, canonical(args))), None
        )
        if earlier is not None:
            return Stop(
                "cycle",
                f"Not called: {tool}({canonical(args)}) was already called in this chain (step {earlier.n}).",
                suggested,
            )
        if len(self.calls) >= self.follow.max_chain_depth:
            return Stop(
                "depth_limit",
                f"Not called: the chain reached max_chain_depth = "
                f"{self.follow.max_chain_depth} calls (the first included).",
                suggested,
            )
        reason = policy.approval_reason(self.spec, self.defaults, verdict.tool)
        if reason is None:
            return None
        step = Step(len(self.steps) + 1, "chain", tool, args)
        row = await self.hooks.approve(step, reason, policy.approvers(self.spec, self.defaults))
        if row["status"] == "accepted":
            return None
        why = "expired" if row["status"] == "expired" else "declined"
        who = f" by {row['answered_by']}" if row.get("answered_by") else ""
        return Stop(
            f"approval_{why}", f"Not called: its approval ({reason}) was {row['status']}{who}.", suggested
        )

    def _refused(self, refusal: admission.Refusal, suggested: dict[str, Any]) -> Stop:
        """The stop for a suggested call the admission rule refused (calls/admission.py)."""
        match refusal:
            case admission.Denied(tool=tool, rule=rule):
                message = f"Not called: {tool} is denied by emceepee's config ({rule})."
                return Stop("denied", message, suggested, how=False)
            case admission.Unlisted(tool=tool):
                names = [n for n in self.backend.offer.tools if policy.visible(self.spec, n)]
                close = difflib.get_close_matches(tool, names, n=3)
                near = f" Closest: {', '.join(close)}." if close else ""
                message = f"Not called: '{self.server}' has no tool '{tool}'.{near}"
                return Stop("unknown_tool", message, suggested, how=False)
            case admission.Invalid(tool=tool, problems=problems):
                message = f"Not called: the arguments for {tool} do not match its input schema: "
                return Stop("invalid_arguments", message + "; ".join(problems), suggested)

    # ---- what the host gets --------------------------------------------------------------

    def deliver(self, result: types.CallToolResult) -> types.CallToolResult:
        """The last result, untouched, plus the blocks that say what else happened."""
        blocks: list[dict[str, Any]] = []
        if self.suggested or len(self.calls) > 1:
            blocks.append({"tool_chain": self._chain_block()})
        if self.resumes:
            last = self.steps[-1]
            complete = last.token is None
            resumed: dict[str, Any] = {"count": self.resumes, "complete": complete}
            if not complete:
                resumed["why"] = f"auto_resume_limit ({self.follow.auto_resume_limit}) reached"
            blocks.append({"resumed": resumed})
        if self.steps and (token := self.steps[-1].token) is not None:
            last = self.steps[-1]
            again = how(self.server, last.tool, last.args, token)
            blocks.append({"resumable": {"resume_token": token, "how": again}})
        if len(self.steps) > 1:
            read = f"get_task(task_id='{self.task_id}') lists every step with its whole result"
            earlier = {"count": len(self.steps) - 1, "task_id": self.task_id, "read_with": read}
            blocks.append({"earlier_results": earlier})
        if not blocks:
            return result
        extra = [types.TextContent(type="text", text=compact(block)) for block in blocks]
        return result.model_copy(update={"content": [*result.content, *extra]})

    def _chain_block(self) -> dict[str, Any]:
        block: dict[str, Any] = {"steps": [s.trace() for s in self.steps]}
        if self.stopped is not None:
            stopped: dict[str, Any] = {"reason": self.stopped.reason, "message": self.stopped.message}
            if self.stopped.suggested is not None:
                stopped["suggested"] = self.stopped.suggested
                if self.stopped.how:
                    s = self.stopped.suggested
                    stopped["how"] = how(self.server, str(s.get("tool")), s.get("arguments"))
            block["stopped"] = stopped
        return block
