"""A question shown once in full, then as a short reminder.

A parked question rides on every reply until it is answered (category 4), and its schema can be
kilobytes: a reply of a hundred bytes would carry three thousand. So the first reply that carries
a question shows it whole, and the later ones only what identifies it — its ids, server and
message, and a URL-mode question's link (short, and the one thing a person must see) — with the
tool that has the rest.
"""

from __future__ import annotations

from typing import Any

from emceepee_cli.store.records import Kind, QuestionJson

DETAILS = {Kind.ELICITATION.value: "get_elicitations", Kind.SAMPLING.value: "get_sampling_requests"}


def reminder(question: QuestionJson) -> dict[str, Any]:
    """What identifies a question already shown whole, and where the rest is."""
    out: dict[str, Any] = {"request_id": question["request_id"], "server": question["server"]}
    out["kind"] = question["kind"]
    if "message" in question:
        out["message"] = question["message"]
    if question.get("url"):
        out["url"] = question["url"]
    if "task_id" in question:
        out["task_id"] = question["task_id"]
    out["expires_at"] = question["expires_at"]
    out["details"] = f"{DETAILS.get(question['kind'], 'get_elicitations')}(server='{question['server']}')"
    return out
