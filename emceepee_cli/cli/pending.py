"""`emceepee pending` and `emceepee answer`: a person answers a backend's question from a terminal.

A question (an elicitation or a sampling request) is a `pending` row in the journal. `answer`
shows it, checks that someone can still deliver an answer, builds the answer (from a flag, or by
asking at the terminal), checks it against the question (`core.pending.check_answer`) and settles
the row — the first writer wins. The `serve` process that asked notices within a moment and passes
the answer to the backend. When that process is gone nobody can, so nothing is written; the one
exception is a resumable 2026-07-28 call, which the next `serve` adopts and re-drives.
"""

from __future__ import annotations

import json as jsonlib
import math
import sys
import webbrowser
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from emceepee_cli.cli import render
from emceepee_cli.cli.options import DbOpt, JsonOpt
from emceepee_cli.cli.tasks import open_journal
from emceepee_cli.clock import age
from emceepee_cli.core import schema
from emceepee_cli.core.answers import already_answered, check_answer, sampling_answer
from emceepee_cli.errors import UsageError
from emceepee_cli.store.journal import Journal
from emceepee_cli.store.records import Kind, PendingRow, TaskStatus, params_of, question_json

LISTING = "See them with: emceepee pending"
# The flags each shape of question takes, and how to say so.
ALLOWED = {
    "form": {"--json", "--decline", "--cancel"},
    "url": {"--json", "--decline", "--cancel", "--open"},
    "sampling": {"--text", "--model"},
}
USAGE = {
    "form": "--json '{...}' (its content), --decline or --cancel",
    "url": "--json '{}' (done at the URL), --decline or --cancel; --open opens the URL",
    "sampling": "--text TEXT (and --model M)",
}
ANSWER_FLAGS = {"--json", "--decline", "--cancel", "--text"}

IdArg = Annotated[
    str,
    typer.Argument(
        metavar="ID", help="A pending question's id, or any unique prefix of one.", show_default=False
    ),
]
AnswerJsonOpt = Annotated[
    str | None,
    typer.Option(
        "--json",
        help="""Accept with this content, e.g. '{"name": "Ada"}' ('{}' for a URL question).""",
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
    rows = open_journal(db).pending_rows()
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
    json: AnswerJsonOpt = None,
    decline: DeclineOpt = False,
    cancel: CancelOpt = False,
    text: TextOpt = None,
    model: ModelOpt = None,
    open_: OpenOpt = False,
    db: DbOpt = None,
) -> None:
    """Answer a backend's question: a form, a URL to visit, or a sampling request."""
    journal = Journal(db)  # not open_journal: a dead owner's question is explained below, not rejected unseen
    row = find(journal, request_id)
    show(row)
    given = Given(json, decline, cancel, text, model, open_)
    given.check(row)
    delivery = deliverer(journal, row)
    reply = build_reply(row, given)
    if not journal.settle_pending(row["request_id"], check_answer(row, reply), answer=reply, by="cli"):
        raise already_answered(journal.pending_row(row["request_id"]) or row)
    settled = journal.pending_row(row["request_id"]) or row
    render.line(f"Answered {row['request_id']} ({settled['status']}); {delivery}")


# ---- finding and showing a question ---------------------------------------------------------


def find(journal: Journal, request_id: str) -> PendingRow:
    return journal.resolve_question(request_id, LISTING, what="question")


def shape(row: PendingRow) -> str:
    if row["kind"] == Kind.SAMPLING:
        return "sampling"
    return "url" if params_of(row).get("mode") == "url" else "form"


def question_text(row: PendingRow) -> str:
    params = params_of(row)
    if row["kind"] == Kind.SAMPLING:
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
    params = params_of(row)
    task = f", task {row['task_id']}" if row.get("task_id") else ""
    asked = f"asked {age(row['created_at'])} ago"
    render.line(f"Question {row['request_id']} ({row['kind']}) from {row['server']}{task}, {asked}:")
    if row["kind"] == Kind.SAMPLING:
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


# ---- who will deliver the answer ----------------------------------------------------------------


def deliverer(journal: Journal, row: PendingRow) -> str:
    """How the answer reaches the backend, or an error (and nothing written) when nothing can pass it on."""
    if row["status"] != "pending":
        raise _not_pending(row)
    owner = journal.instance(row["instance_id"])
    if owner is not None and journal.instance_alive(owner):
        return f"the emceepee process that asked (pid {owner['pid']}) will pass it to the backend within a moment."
    seen = (
        f"(pid {owner['pid']}, last seen {age(owner.get('stopped_at') or owner['heartbeat_at'])} ago)"
        if owner is not None
        else "(no record of it)"
    )
    task = journal.task(row["task_id"]) if row["task_id"] else None
    if task is not None and task.get("request_state") is not None and task["status"] == TaskStatus.WORKING:
        return (
            f"the emceepee process that asked {seen} has stopped; the answer will be delivered when emceepee "
            f"next starts (it resumes the call)."
        )
    raise UsageError(
        f"The emceepee process that asked question {row['request_id']} {seen} is gone, so no backend is "
        f"waiting for the answer. Nothing was answered.",
        hint="Call the tool again from your MCP host; it will ask again.",
    )


def _not_pending(row: PendingRow) -> UsageError:
    base = already_answered(row)
    return UsageError(f"{base.message} ({row['error']})", hint=base.hint) if row.get("error") else base


# ---- building the answer -------------------------------------------------------------------------


@dataclass(frozen=True)
class Given:
    """The answer flags of `emceepee answer`."""

    json: str | None
    decline: bool
    cancel: bool
    text: str | None
    model: str | None
    open: bool

    @property
    def used(self) -> set[str]:
        flags = {
            "--json": self.json is not None,
            "--decline": self.decline,
            "--cancel": self.cancel,
            "--text": self.text is not None,
            "--model": self.model is not None,
            "--open": self.open,
        }
        return {flag for flag, on in flags.items() if on}

    def check(self, row: PendingRow) -> None:
        kind, rid = shape(row), row["request_id"]
        if wrong := sorted(self.used - ALLOWED[kind]):
            what = {"form": "a form", "url": "a URL question", "sampling": "a sampling request"}[kind]
            raise UsageError(
                f"{', '.join(wrong)} does not apply to {rid}: it is {what}.",
                hint=f"Answer it with {USAGE[kind]}.",
            )
        if len(chosen := sorted(self.used & {"--json", "--decline", "--cancel"})) > 1:
            raise UsageError(f"Give only one of {', '.join(chosen)}.")
        if not self.used & ANSWER_FLAGS and not sys.stdin.isatty():
            raise UsageError(
                f"Question {rid} needs an answer, and there is no terminal to ask it on.",
                hint=f"Give the answer with {USAGE[kind]}.",
            )


def build_reply(row: PendingRow, given: Given) -> dict[str, Any]:
    kind, params = shape(row), params_of(row)
    if given.decline or given.cancel:
        return {"action": "decline" if given.decline else "cancel"}
    if kind == "url" and given.open and not webbrowser.open(str(params.get("url"))):
        render.warn("Could not start a browser; open the URL yourself.")
    try:
        if kind == "sampling":
            text = given.text if given.text is not None else ask_text()
            return sampling_answer(text, given.model or "human", None)
        if given.json is not None:
            content = parse_content(given.json)
        else:
            content = ask_done(row) if kind == "url" else ask_form(params.get("requested_schema") or {})
    except (EOFError, KeyboardInterrupt):
        render.line()
        raise UsageError(f"Stopped; question {row['request_id']} is still pending.") from None
    if kind == "url":
        if content:
            raise UsageError("A URL question takes no content.", hint="Say you are done with --json '{}'.")
        return {"action": "accept"}
    return {"action": "accept", "content": content}


def parse_content(text: str) -> dict[str, Any]:
    try:
        content = jsonlib.loads(text)
    except ValueError as exc:
        raise UsageError(
            f"--json is not valid JSON: {exc}.", hint="""Give an object, e.g. --json '{"name": "Ada"}'."""
        ) from exc
    if not isinstance(content, dict):
        raise UsageError(
            "--json must be a JSON object of the form's fields.", hint="""E.g. --json '{"name": "Ada"}'."""
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


# ---- asking for a form at the terminal ------------------------------------------------------------

SKIP = object()


@dataclass
class Field:
    """One property of a form's `requested_schema`, as the terminal asks for it."""

    name: str
    prop: dict[str, Any]
    required: bool
    kind: str = field(init=False)
    choices: list[tuple[Any, str]] | None = field(init=False)

    def __post_init__(self) -> None:
        kind = self.prop.get("type", "string")
        self.kind = kind if isinstance(kind, str) else next((k for k in kind if k != "null"), "string")
        self.choices = choices(self.prop.get("items") or {} if self.kind == "array" else self.prop)

    def hint(self) -> str:
        if self.choices:
            base = f"1-{len(self.choices)}" + (", several comma-separated" if self.kind == "array" else "")
        else:
            base = {
                "boolean": "y/n",
                "integer": "a whole number",
                "number": "a number",
                "array": "values, comma-separated",
            }.get(self.kind, "text")
        if "default" in self.prop:
            return f"{base}, Enter = {self.shown(self.prop['default'])}"
        return base if self.required else f"{base}, Enter skips"

    def shown(self, value: Any) -> str:
        if isinstance(value, list):
            return ", ".join(self.shown(v) for v in value)
        if isinstance(value, bool):
            return "yes" if value else "no"
        return next((title for v, title in self.choices or [] if v == value), str(value))

    def parse(self, text: str) -> Any:
        if self.kind == "array":
            parts = [p.strip() for p in text.split(",") if p.strip()]
            return [pick(p, self.choices) if self.choices else p for p in parts]
        if self.choices:
            return pick(text, self.choices)
        if self.kind == "boolean":
            if text.lower() in ("y", "yes", "true"):
                return True
            if text.lower() in ("n", "no", "false"):
                return False
            raise ValueError("Answer y or n.")
        if self.kind in ("integer", "number"):
            return parse_number(text, whole=self.kind == "integer")
        return text


def choices(prop: dict[str, Any]) -> list[tuple[Any, str]] | None:
    """(value, title) pairs of an enum: `enum` (+ legacy `enumNames`) or `oneOf`/`anyOf` of `const`s."""
    if "enum" in prop:
        names = prop.get("enumNames") or []
        return [(v, str(names[i]) if i < len(names) else str(v)) for i, v in enumerate(prop["enum"])]
    options = prop.get("oneOf") or prop.get("anyOf")
    if options and all(isinstance(o, dict) and "const" in o for o in options):
        return [(o["const"], str(o.get("title") or o["const"])) for o in options]
    return None


def pick(text: str, options: list[tuple[Any, str]]) -> Any:
    # A typed value (or title) wins over a number, so enum ["2", "1"] still means what is typed.
    for value, title in options:
        if text == str(value) or text.casefold() == title.casefold():
            return value
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1][0]
    raise ValueError(f"Choose 1-{len(options)} (or type a value).")


def parse_number(text: str, whole: bool) -> int | float:
    try:
        return int(text)
    except ValueError:
        if whole:
            raise ValueError(f"'{text}' is not a whole number.") from None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a number.") from None
    if not math.isfinite(value):
        raise ValueError(f"'{text}' is not a finite number.")
    return value


def ask_form(requested: dict[str, Any]) -> dict[str, Any]:
    required = set(requested.get("required") or [])
    content: dict[str, Any] = {}
    for name, prop in (requested.get("properties") or {}).items():
        value = ask_field(Field(name, prop, name in required))
        if value is not SKIP:
            content[name] = value
    return content


def ask_field(f: Field) -> Any:
    render.line()
    render.line(f"{f.prop.get('title') or f.name}{' (required)' if f.required else ''}")
    if f.prop.get("description"):
        render.line(f"  {f.prop['description']}")
    for i, (value, title) in enumerate(f.choices or [], 1):
        render.line(f"  {i}) {title}" + ("" if title == str(value) else f" ({value})"))
    while True:
        text = render.ask(f"  [{f.hint()}] > ").strip()
        if not text:
            if "default" in f.prop or not f.required:
                return f.prop.get("default", SKIP)
            render.warn("  This field is required.")
            continue
        try:
            value = f.parse(text)
        except ValueError as exc:
            render.warn(f"  {exc}")
            continue
        if not (wrong := schema.problems(value, f.prop, root=f.name)):
            return value
        render.warn("  " + "; ".join(wrong))
