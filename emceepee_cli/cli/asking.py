"""`emceepee call`'s side of a conversation with a backend: its arguments, its progress, its questions.

A question is asked at the terminal with the same form `emceepee answer` uses. Reading the
terminal blocks, so it happens on a daemon thread: the event loop keeps serving the backend,
and Ctrl-C ends the command at once. With no terminal, a form is declined and a sampling
request refused, and the command says so.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from emceepee_cli.cli.terminal import render
from emceepee_cli.errors import UsageError


def parse_args(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(
            f"--args is not valid JSON: {exc}.", hint="""E.g. --args '{"text": "hi"}'."""
        ) from None
    if not isinstance(value, dict):
        raise UsageError("--args must be a JSON object.", hint="""E.g. --args '{"text": "hi"}'.""")
    return value


def pairs_for(schema: dict[str, Any], pairs: list[str]) -> dict[str, Any]:
    """`NAME=VALUE` arguments: a value stays a string where the schema wants one, else it is read as
    JSON when it is JSON (`n=3`, `flag=true`, `tags=["a"]`), else it stays a string."""
    properties = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(
                f"Argument '{pair}' is not NAME=VALUE.",
                hint="""E.g. emceepee call echo add a=2 b=3, or --args '{"a": 2, "b": 3}'.""",
            )
        wanted = (properties.get(name) or {}).get("type")
        if wanted == "string" or (isinstance(wanted, list) and wanted[:1] == ["string"]):
            out[name] = value
            continue
        try:
            out[name] = json.loads(value)
        except ValueError:
            out[name] = value
    return out


async def progress(done: float, total: float | None, message: str | None) -> None:
    amount = f"{done:g}/{total:g}" if total else f"{done:g}"
    render.status(f"… {amount}" + (f" {message}" if message else ""))


async def ask(server: str, kind: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The person's answer to a backend's question (None: refused), asked on a daemon thread."""
    import anyio
    import anyio.from_thread
    import anyio.lowlevel

    done = anyio.Event()
    answered: list[dict[str, Any] | None] = []
    failed: list[BaseException] = []
    token = anyio.lowlevel.current_token()

    def work() -> None:
        try:
            answered.append(answer(server, kind, params))
        except BaseException as exc:  # noqa: BLE001  # carried to the event loop and raised there
            failed.append(exc)
        finally:
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=work, name=f"question from {server}", daemon=True).start()
    await done.wait()
    if failed:
        raise failed[0]
    return answered[0]


def answer(server: str, kind: str, params: dict[str, Any]) -> dict[str, Any] | None:
    from emceepee_cli.cli import pending
    from emceepee_cli.cli.terminal import form

    render.clear_status()
    if not sys.stdin.isatty():
        what = "declined it" if kind == "elicitation" else "refused it"
        article = "an" if kind == "elicitation" else "a"
        render.warn(
            f"Backend '{server}' asked {article} {kind} question, and there is no terminal "
            f"to ask it on: {what}."
        )
        return {"action": "decline"} if kind == "elicitation" else None
    render.line(f"Backend '{server}' asks:", style="bold")
    try:
        if kind == "sampling":
            for message in params.get("messages") or []:
                render.line(f"  {message.get('role')}: {pending.content_text(message.get('content'))}")
            text = pending.ask_text()
            return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "human"}
        render.line(f"  {params.get('message', '')}")
        if params.get("mode") == "url":
            render.line(f"  URL: {params.get('url')}")
            done = render.ask("Done? [y/N] ").strip().lower() in ("y", "yes")
            return {"action": "accept" if done else "decline"}
        render.note("  (Ctrl-D declines)")
        return {"action": "accept", "content": form.ask_form(params.get("requested_schema") or {})}
    except EOFError:
        render.line()
        return {"action": "decline"} if kind == "elicitation" else None
