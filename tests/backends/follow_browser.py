"""A browser for tests, named by `$BROWSER`: it GETs the URL it is given and follows redirects (at
most 10, 10 s in all), as a person's browser does after they approve, until the redirect lands on
the loopback listener. Each URL it was asked to open is appended to `$FOLLOW_LOG` (when set).
With `$FOLLOW_NOT=1` it only records the URL: a person who never looks."""

from __future__ import annotations

import os
import sys

import httpx2


def main() -> None:
    url = sys.argv[-1]
    if log := os.environ.get("FOLLOW_LOG"):
        with open(log, "a", encoding="utf-8") as out:
            out.write(url + "\n")
    if os.environ.get("FOLLOW_NOT") == "1":
        return
    with httpx2.Client(follow_redirects=True, max_redirects=10, timeout=10) as http:
        http.get(url)


if __name__ == "__main__":
    main()
