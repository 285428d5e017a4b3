"""serve's person for a remote backend's sign-in: the browser is opened (in the fleet, from the
host's environment: signin/browser.py), and the authorization URL is also a URL-mode question, so
a person who only sees their desktop host sees the link.

The question is forwarded to a host that takes URL elicitation, and parked otherwise: `emceepee
pending` lists it, and it rides on every reply's pending block until the sign-in ends. It belongs
to no call (`CORRELATION`). The redirect reaching emceepee's loopback listener settles it
(accepted, by the browser); the person declining it (the host's form, `respond_to_elicitation`,
`emceepee answer`) ends the sign-in; accepting it only says the link was opened, and the sign-in
goes on waiting for the redirect. Events say when a sign-in is needed and how it ended.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

import anyio

from emceepee_cli.errors import EmceepeeError
from emceepee_cli.events import Events
from emceepee_cli.ids import new_id
from emceepee_cli.questions.questions import Question, Questions
from emceepee_cli.signin.browser import open_browser
from emceepee_cli.signin.flow import authorization_target
from emceepee_cli.store.records import Kind

CORRELATION = "sign_in"

logger = logging.getLogger(__name__)


class SignInQuestions:
    """The `Person` (signin/flow.py) of serve's backends."""

    def __init__(
        self,
        questions: Questions,
        events: Events,
        browser: bool = True,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.questions = questions
        self.events = events
        self.browser = browser
        self.environ = environ  # in the fleet, the host's: its browser, on its display
        self.asked: dict[str, Question] = {}

    def __repr__(self) -> str:
        return f"<SignInQuestions asking={sorted(self.asked)}>"

    async def show(self, server: str, url: str) -> None:
        if self.browser:
            open_browser(url, self.environ)
        params = {
            "mode": "url",
            "message": f"Sign in to '{server}' at {authorization_target(url)} so emceepee can reach it "
            "(emceepee opened this link in your browser; open it here if no page appeared).",
            "url": url,
            "elicitationId": new_id(),
        }
        question = await self.questions.ask(
            server, Kind.ELICITATION, params, task_id=None, correlation=CORRELATION, blocks_call=False
        )
        self.asked[server] = question
        self.events.emit(
            "sign_in_required",
            server,
            {
                "request_id": question.request_id,
                "url": url,
                "hint": "The user signs in by opening the link; or from a terminal: "
                f"emceepee auth login {server}.",
            },
        )

    async def declined(self, server: str) -> str:
        question = self.asked.get(server)
        if question is None:
            await anyio.sleep_forever()
        assert question is not None
        await question.answered.wait()
        row = question.row
        answer = json.loads(row["answer"] or "{}")
        if row["status"] == "accepted" and answer.get("action", "accept") == "accept":
            await anyio.sleep_forever()  # the link was opened: the redirect settles it
        if row["status"] == "expired":
            return f"its question {question.request_id} expired before anyone signed in"
        return f"its question {question.request_id} was {row['status']}"

    async def done(self, server: str, signed_in: bool) -> None:
        try:
            await self._done(server, signed_in)
        except EmceepeeError as exc:  # the journal: the sign-in's own outcome stands
            logger.warning("backend %s: the sign-in question could not be settled: %s", server, exc.message)

    async def _done(self, server: str, signed_in: bool) -> None:
        question = self.asked.pop(server, None)
        if question is not None and not question.answered.is_set():
            if signed_in:
                await self.questions.settle(
                    question.request_id, "accepted", answer={"action": "accept"}, by="browser"
                )
            else:
                await self.questions.settle(
                    question.request_id, "cancelled", error="the sign-in ended without signing in"
                )
        if question is not None:
            self.questions.live.pop(question.request_id, None)
        self.events.emit(
            "signed_in" if signed_in else "sign_in_failed",
            server,
            {"hint": "Call its tools again." if signed_in else f"Run: emceepee auth login {server}."},
        )
