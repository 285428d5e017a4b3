"""A user-supplied regular expression (list_tools' `pattern`), matched within a bound.

A pattern comes from the host, so it is untrusted: `(a|aa)+$` against a long description
backtracks for minutes. Python's `re` cannot be interrupted and holds the GIL while it runs, so
we use the `regex` package, whose matching takes a timeout (and releases the GIL, so the caller
can run it in a worker thread and keep the event loop free). One listing gets `BUDGET_S` in all.
`regex` expands counted repetitions when it compiles (`a{4294967294}` exhausts memory), so the
pattern's length and the product of its repeat counts are capped before it is compiled.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence

import regex

from emceepee_cli.errors import UsageError

BUDGET_S = 2.0  # for one listing: thousands of tools match a sane pattern in milliseconds
MAX_CHARS = 500
MAX_REPEAT = 10_000  # product of every {n,m} bound in the pattern; compiling that is ~10 ms
_COUNTED = regex.compile(r"\{(\d*),?(\d*)\}")
_SIMPLIFY = "Simplify it: a plain word, or alternatives like 'git|commit', are matched case-insensitively."


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """`pattern` compiled case-insensitively, or a `UsageError` saying what is wrong with it."""
    if len(pattern) > MAX_CHARS:
        raise UsageError(
            f"pattern is {len(pattern)} characters long; the limit is {MAX_CHARS}.", hint=_SIMPLIFY
        )
    counts = [int(n) for match in _COUNTED.finditer(pattern) for n in match.groups() if n]
    if math.prod(counts) > MAX_REPEAT:
        raise UsageError(
            f"pattern's counted repetitions ({', '.join(map(str, counts))}) multiply past {MAX_REPEAT:,}.",
            hint="Use smaller counts in {n,m}, or + and * instead.",
        )
    try:
        return regex.compile(pattern, regex.IGNORECASE | regex.VERSION0)
    except (regex.error, OverflowError, MemoryError, RecursionError) as exc:
        raise UsageError(
            f"pattern is not a valid regular expression: {exc}", hint="Escape special characters, e.g. '\\.'."
        ) from None


def matching(pattern: str, items: Sequence[Iterable[str]], budget_s: float = BUDGET_S) -> list[bool]:
    """For each item (a tool's name and description…), whether `pattern` is found in any of its texts.

    Blocking: call it from a worker thread. Running out of `budget_s` is a `UsageError`.
    """
    matcher = compile_pattern(pattern)
    deadline = time.monotonic() + budget_s
    try:
        return [any(matcher.search(text, timeout=_left(deadline)) for text in texts) for texts in items]
    except TimeoutError:
        raise UsageError(
            f"pattern {pattern!r} took more than {budget_s:g} s to match the tool listings; "
            "it backtracks too much (nested repetition like (a|aa)+ or (a+)+ is the usual cause).",
            hint=_SIMPLIFY,
        ) from None


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left
