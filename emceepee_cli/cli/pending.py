"""`emceepee pending` and `emceepee answer`: a person answers a backend's question from a terminal.

A question (an elicitation or a sampling request) is a `pending` row in the journal. `answer`
shows it, checks that someone can still deliver an answer (`questions.answers.who_delivers`), builds
the answer (from a flag, or by asking at the terminal: `form.py`) and records it with
`questions.answers.answer_question`, as every other answerer does — the first writer wins. The `serve`
process that asked notices within a moment and passes the answer to the backend; the fleets of this
emceepee (serving hosts when the fleet is on) are told to look at once (`rendezvous.poke_fleets`).
When that process is gone nobody can, so nothing is written; the one exception is a resumable
2026-07-28 call, which the next `serve` adopts and re-drives.

The journal and the serve parts are imported when a command runs, not when the CLI starts.
"""

from __future__ import annotations

import json as jsonlib
import os
import sys
import webbrowser
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from emceepee_cli.cli.framework.options import DbOpt, JsonOpt
from emceepee_cli.cli.terminal import form, render
from emceepee_cli.cli.terminal.form import ask_form
from emceepee_cli.clock import age
from emceepee_cli.errors import UsageError

if TYPE_CHECKING:
    from emceepee_cli.store.journal import Journal
    from emceepee_cli.store.records import PendingRow

__all__ = ["answer", "ask_form", "ask_text", "content_text", "pending"]

LISTING = "See them with: emceepee pending"
POKE_S = 1.0  # at most this long telling the fleets an answer is there; their watcher looks anyway
# The flags each shape of question takes, and how to say so.
ALLOWED = {
    "form": {"--content", "--decline", "--cancel"},
    "url": {"--content", "--decline", "--cancel", "--open"},
    "sampling": {"--text", "--model"},
}
USAGE = {
    "form": "--content '{...}' (its fields as a JSON object), --decline or --cancel",
    "url": "--content '{}' (done at the URL), --decline or --cancel; --open opens the URL",
    "sampling": "--text TEXT (and --model M)",
}
ANSWER_FLAGS = {"--content", "--decline", "--cancel", "--text"}

IdArg = Annotated[
    str,
    typer.Argument(
        metavar="ID", help="A pending question's id, or any unique prefix of one.", show_default=False
    ),
]
ContentOpt = Annotated[
    str | None,
    typer.Option(
        "--content",
        help="""Accept with this content, a JSON object: e.g. '{"name": "Ada"}' ('{}' for a URL question).""",
        show_default=False,
    ),
]
DeclineOpt = Annotated[bool, typer.Option("--decline", help="Decline the question (elicitation).")]
CancelOpt = Annotated[
    bool, typer.Option("--cancel", help="Dismiss the question without choosing (elicitation).")
]
TextOpt = Annotated[
    str | None, typer.Option("--text", help="The reply to a sampling request.", show_default=False)
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="The model a sampling reply names (default: human).", show_default=False),
]
OpenOpt = Annotated[bool, typer.Option("--open", help="Open a URL question's address in the browser first.")]


def pending(db: DbOpt = None, json: JsonOpt = False) -> None:
    """List the questions backends are waiting on; answer one with: emceepee answer ID."""
    from emceepee_cli.cli.tasks import open_journal
    from emceepee_cli.store.records import question_json

    rows = open_journal(db).pending.rows()
    if json:
        render.as_json({"pending": [question_json(r) for r in rows]})
        return
    render.table(
        "Pending questions",
        ("id", "kind", "server", "task", "age", "question"),
        (
            (r["request_id"], r["kind"], r["server"], r["task_id"], age(r["created_at"]), question_text(r))
            for r in rows
        ),
        empty="No pending questions.",
    )


def answer(
    request_id: IdArg,
    content: ContentOpt = None,
    decline: DeclineOpt = False,
    cancel: CancelOpt = False,
    text: TextOpt = None,
    model: ModelOpt = None,
    open_: OpenOpt = False,
    db: DbOpt = None,
    json: JsonOpt = False,
) -> None:
    """Answer a backend's question: a form, a URL to visit, or a sampling request.

    Without an answer option the question is asked at the terminal. With --json the outcome is
    printed as JSON (what respond_to_elicitation returns, and how the answer reaches the backend);
    the answer itself is then given with an option. An approval is accepted only by answering y
    at a terminal (stdin and stdout); --decline or --cancel work anywhere.
    """
    from emceepee_cli.questions.answers import answer_question, who_delivers
    from emceepee_cli.store.journal import Journal
    from emceepee_cli.store.records import question_json

    journal = Journal(db)  # not open_journal: a dead owner's question is explained below, not rejected unseen
    row = find(journal, request_id)
    if not json:
        show(row)
    given = Given(content, decline, cancel, text, model, open_)
    given.check(row, can_ask=sys.stdin.isatty() and not json)
    if row.get("purpose") == "approval":
        check_approval(row, given, json)
        if not (given.decline or given.cancel):
            check_not_under_serve(journal, row)
    delivery = who_delivers(journal, row)
    settled = answer_question(journal, row["request_id"], build_reply(row, given), by="cli")
    from emceepee_cli import rendezvous

    rendezvous.poke_fleets(POKE_S)
    if json:
        render.as_json({"answered": question_json(settled), "delivery": delivery})
        return
    render.line(f"Answered {row['request_id']} ({settled['status']}); {delivery}")


# ---- finding and showing a question ---------------------------------------------------------


def _params(row: PendingRow) -> dict[str, Any]:
    params: dict[str, Any] = jsonlib.loads(row["params"])
    return params


def find(journal: Journal, request_id: str) -> PendingRow:
    """The question `request_id` (a unique prefix will do) names."""
    return journal.pending.resolve(request_id, LISTING, what="question")


def shape(row: PendingRow) -> str:
    if row["kind"] == "sampling":
        return "sampling"
    return "url" if _params(row).get("mode") == "url" else "form"


def question_text(row: PendingRow) -> str:
    params = _params(row)
    if row["kind"] == "sampling":
        messages = params.get("messages") or []
        return content_text(messages[-1].get("content")) if messages else ""
    return str(params.get("url") if params.get("mode") == "url" else params.get("message", ""))


def content_text(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    return " ".join(
        str(b.get("text", "")) if b.get("type") == "text" else f"[{b.get('type')}]"
        for b in blocks
        if isinstance(b, dict)
    )


def show(row: PendingRow) -> None:
    params = _params(row)
    task = f", task {row['task_id']}" if row.get("task_id") else ""
    asked = f"asked {age(row['created_at'])} ago"
    render.line(f"Question {row['request_id']} ({row['kind']}) from {row['server']}{task}, {asked}:")
    if row["kind"] == "sampling":
        if params.get("system_prompt"):
            render.line(f"  system: {params['system_prompt']}")
        for message in params.get("messages") or []:
            render.line(f"  {message.get('role')}: {content_text(message.get('content'))}")
        if params.get("max_tokens"):
            render.line(f"  (a reply of up to {params['max_tokens']} tokens is wanted)")
        return
    render.line(f"  {params.get('message', '')}")
    if params.get("mode") == "url":
        render.line(f"  URL: {params.get('url')}")


# ---- building the answer -------------------------------------------------------------------------


@dataclass(frozen=True)
class Given:
    """The answer flags of `emceepee answer`."""

    content: str | None
    decline: bool
    cancel: bool
    text: str | None
    model: str | None
    open: bool

    @property
    def used(self) -> set[str]:
        flags = {
            "--content": self.content is not None,
            "--decline": self.decline,
            "--cancel": self.cancel,
            "--text": self.text is not None,
            "--model": self.model is not None,
            "--open": self.open,
        }
        return {flag for flag, on in flags.items() if on}

    def check(self, row: PendingRow, can_ask: bool) -> None:
        kind, rid = shape(row), row["request_id"]
        if wrong := sorted(self.used - ALLOWED[kind]):
            what = {"form": "a form", "url": "a URL question", "sampling": "a sampling request"}[kind]
            raise UsageError(
                f"{', '.join(wrong)} does not apply to {rid}: it is {what}.",
                hint=f"Answer it with {USAGE[kind]}.",
            )
        if len(chosen := sorted(self.used & {"--content", "--decline", "--cancel"})) > 1:
            raise UsageError(f"Give only one of {', '.join(chosen)}.")
        if row.get("purpose") == "approval":
            return  # only a person accepts one: check_approval
        if not self.used & ANSWER_FLAGS and not can_ask:
            raise unasked(row, "there is no terminal to ask it on" if not sys.stdin.isatty() else "--json")


def check_approval(row: PendingRow, given: Given, json: bool) -> None:
    """An approval is accepted only by a person answering y to it at a terminal: stdin and stdout
    both one, the call shown first. A flag, a pipe (`yes |`) or a script may decline it, never
    accept it; the approval then stays pending."""
    if given.decline or given.cancel:
        return
    rid = row["request_id"]
    if given.content is not None:
        why = "--content cannot accept it"
    elif json:
        why = "--json is for scripts, and a script cannot accept it"
    elif not sys.stdin.isatty():
        why = "the input here is not a terminal"
    elif not sys.stdout.isatty():
        why = "the output here is not a terminal"
    else:
        return
    raise UsageError(
        f"Approval {rid} is accepted only by a person answering y to it at a terminal; {why}. "
        "Nothing was answered; it is still pending.",
        hint=f"Run `emceepee answer {rid}` in a terminal and answer y (or accept it in your MCP client); "
        f"`emceepee answer {rid} --decline` declines it from anywhere.",
    )


def check_not_under_serve(journal: Journal, row: PendingRow) -> None:
    """A terminal that a program emceepee runs has made (a backend, or what it ran: the model's
    reach, a pty included) is not a person's: an approval is never accepted from under a `serve`."""
    why = journal.instances.under_serve(os.getpid())
    if why is None:
        return
    rid = row["request_id"]
    raise UsageError(
        f"Approval {rid} cannot be accepted here: {why}, so it may have been started by a program "
        "emceepee runs, which is the model's reach, not a person's. Nothing was answered; it is still "
        "pending.",
        hint=f"Run `emceepee answer {rid}` in a terminal of your own (or accept it in your MCP client); "
        f"`emceepee answer {rid} --decline` declines it from anywhere.",
    )


def unasked(row: PendingRow, why: str) -> UsageError:
    """The question cannot be asked here: what it asks, and how to give the answer on the command line."""
    kind, rid, params = shape(row), row["request_id"], _params(row)
    if why == "--json":
        why = "--json prints the outcome for a script, so nothing is asked at the terminal"
    lines = [f"Question {rid} needs an answer, and {why}."]
    if kind == "form":
        requested = params.get("requested_schema") or {}
        lines += [f"It asks: {params.get('message', '')}", "Its fields:"]
        lines += [f"  {field}" for field in form.described(requested)] or ["  (none)"]
        how = f"--content '{form.example(requested)}' (its fields as a JSON object), --decline or --cancel"
    elif kind == "url":
        lines += [f"It asks: {params.get('message', '')}", f"URL: {params.get('url')}"]
        how = USAGE[kind]
    else:
        lines.append(f"It asks for a model's reply to: {question_text(row)}")
        how = USAGE[kind]
    return UsageError("\n".join(lines), hint=f"Answer it with: emceepee answer {rid} {how}.")


def build_reply(row: PendingRow, given: Given) -> dict[str, Any]:
    kind, params = shape(row), _params(row)
    if given.decline or given.cancel:
        return {"action": "decline" if given.decline else "cancel"}
    if kind == "url" and given.open and not webbrowser.open(str(params.get("url"))):
        render.warn("Could not start a browser; open the URL yourself.")
    try:
        if kind == "sampling":
            text = given.text if given.text is not None else ask_text()
            from emceepee_cli.questions.answers import sampling_answer

            return sampling_answer(text, given.model or "human", None)
        if given.content is not None:
            content = parse_content(given.content)
        elif row.get("purpose") == "approval":  # an empty form would accept without asking anything
            return ask_approval(row)
        else:
            content = ask_done(row) if kind == "url" else ask_form(params.get("requested_schema") or {})
    except (EOFError, KeyboardInterrupt):
        render.line()
        raise UsageError(f"Stopped; question {row['request_id']} is still pending.") from None
    if kind == "url":
        if content:
            raise UsageError("A URL question takes no content.", hint="Say you are done with --content '{}'.")
        return {"action": "accept"}
    return {"action": "accept", "content": content}


def parse_content(text: str) -> dict[str, Any]:
    try:
        content = jsonlib.loads(text)
    except ValueError as exc:
        raise UsageError(
            f"--content is not valid JSON: {exc}.",
            hint="""Give an object, e.g. --content '{"name": "Ada"}'.""",
        ) from exc
    if not isinstance(content, dict):
        raise UsageError(
            "--content must be a JSON object of the form's fields.",
            hint="""E.g. --content '{"name": "Ada"}'.""",
        )
    return content


def ask_text() -> str:
    render.line("Your reply (one line; the backend receives it as the model's completion):")
    while not (text := render.ask("> ").strip()):
        render.warn("The reply cannot be empty.")
    return text


def ask_done(row: PendingRow) -> dict[str, Any]:
    if render.ask("Done? [y/N] ").strip().lower() in ("y", "yes"):
        return {}
    raise UsageError(
        f"Nothing was answered; question {row['request_id']} is still pending.",
        hint=f"Run emceepee answer {row['request_id']} again when you are done, or use --decline / --cancel.",
    )


def ask_approval(row: PendingRow) -> dict[str, Any]:
    """The call (or change) to approve, whole, then y/N: only `y` accepts it."""
    from emceepee_cli.store.records import approval_of

    approval = approval_of(row)
    tool = str(approval.get("tool", ""))
    arguments = jsonlib.dumps(approval.get("arguments") or {}, indent=2, ensure_ascii=False)
    render.line(f"  Tool: {printable(tool if approval.get('change') else row['server'] + '.' + tool)}")
    render.line("  Arguments: " + printable(arguments).replace("\n", "\n  "))
    render.line(f"  Reason: {printable(str(approval.get('reason', '')))}")
    allowed = render.ask("Allow? [y/N] ").strip().lower() in ("y", "yes")
    return {"action": "accept", "content": {}} if allowed else {"action": "decline"}


def printable(text: str) -> str:
    """`text` with what a terminal would not show as written (escapes, bidi marks) escaped, lines kept."""
    return "".join(
        ch if ch.isprintable() or ch == "\n" else ch.encode("unicode_escape").decode() for ch in text
    )
