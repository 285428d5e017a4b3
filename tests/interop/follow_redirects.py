#!/usr/bin/env python3
"""A headless "browser" for sign-in tests: `$BROWSER` for emceepee when no person is there.

Python's `webbrowser` runs `$BROWSER <url>` and waits for it. This command GETs the authorization URL
and follows its redirects, one hop at a time, until a hop leads to the loopback `redirect_uri` named in
the authorization URL; it GETs that one too (emceepee's listener takes the code there) and stops. An
authorization server that shows a page instead of redirecting (a real login form) ends the walk with a
clear message: that needs a person. Every walk is bounded in hops and in time, and a redirect that
would carry the code anywhere but a loopback address is refused.

Like `xdg-open`, it returns at once and walks in the background (`--wait` walks in the foreground and
exits non-zero when the walk fails). What happened goes to stderr and, with `--log FILE` (or
`$FOLLOW_REDIRECTS_LOG`), to that file, so a driver can show it when a sign-in never finishes.
Standard library only: it runs under any Python 3.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urljoin, urlsplit

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
DEFAULT_HOPS = 10
DEFAULT_SECONDS = 20.0


class WalkError(Exception):
    """Why a walk stopped before reaching the loopback redirect."""


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """Hand every 3xx back to the caller: each hop is looked at before it is taken."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


OPENER = urllib.request.build_opener(NoRedirects, urllib.request.ProxyHandler({}))  # no proxy: loopback


def redirect_target(url: str) -> str | None:
    """The `redirect_uri` an authorization URL names, if any."""
    found = parse_qs(urlsplit(url).query).get("redirect_uri")
    return found[0] if found else None


def lands_on(url: str, target: str) -> bool:
    """`url` is the redirect target (same scheme, host, port and path; the query holds the code)."""
    a, b = urlsplit(url), urlsplit(target)
    return (a.scheme, a.netloc, a.path or "/") == (b.scheme, b.netloc, b.path or "/")


def is_loopback(url: str) -> bool:
    return urlsplit(url).hostname in LOOPBACK_HOSTS


def fetch(url: str, deadline: float) -> tuple[int, str | None]:
    """GET `url` without following a redirect: (status, Location header or None)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise WalkError(f"out of time before GET {url}")
    try:
        with OPENER.open(urllib.request.Request(url, method="GET"), timeout=left) as response:
            return response.status, response.headers.get("Location")
    except urllib.error.HTTPError as answer:  # 3xx (not followed) and 4xx/5xx land here
        return answer.code, answer.headers.get("Location")
    except (urllib.error.URLError, OSError) as exc:
        raise WalkError(f"GET {url} failed: {exc}") from exc


def walk(url: str, hops: int, seconds: float, say: Say) -> str:
    """Follow `url` to the loopback redirect; the URL that was delivered there."""
    deadline = time.monotonic() + seconds
    target = redirect_target(url)
    for hop in range(hops + 1):
        target = redirect_target(url) or target
        if target is not None and lands_on(url, target):
            if not is_loopback(url):
                raise WalkError(f"refusing to deliver the code to a non-loopback redirect: {url}")
            status, _ = fetch(url, deadline)
            say(f"hop {hop}: delivered to {url} -> {status}")
            if status >= 400:
                raise WalkError(f"the loopback listener answered {status}")
            return url
        status, location = fetch(url, deadline)
        say(f"hop {hop}: GET {url} -> {status}" + (f" Location: {location}" if location else ""))
        if not (300 <= status < 400 and location):
            raise WalkError(f"stopped at {url} (HTTP {status}, no redirect): a page only a person can pass")
        url = urljoin(url, location)
    raise WalkError(f"more than {hops} redirects without reaching the loopback redirect")


class Say:
    """Write a line to stderr and to the log file (if any), each flushed at once."""

    def __init__(self, log: str | None) -> None:
        self.log = log

    def __call__(self, line: str) -> None:
        text = f"follow_redirects[{os.getpid()}] {time.strftime('%H:%M:%S')} {line}\n"
        sys.stderr.write(text)
        sys.stderr.flush()
        if self.log:
            with open(self.log, "a", encoding="utf-8") as file:
                file.write(text)


def run(args: argparse.Namespace) -> int:
    say = Say(args.log)
    try:
        delivered = walk(args.url, args.hops, args.seconds, say)
    except WalkError as exc:
        say(f"FAILED: {exc}")
        return 1
    say(f"DONE: {delivered.split('?')[0]}")
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("url", help="the authorization URL")
    parser.add_argument(
        "--log", default=os.environ.get("FOLLOW_REDIRECTS_LOG"), help="append what happens here"
    )
    parser.add_argument("--hops", type=int, default=DEFAULT_HOPS, help="most redirects followed")
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="time for the whole walk")
    parser.add_argument("--wait", action="store_true", help="walk in the foreground; exit 1 when it fails")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    if not args.wait:
        if os.fork() != 0:
            return 0  # the opener (webbrowser) gets its answer now; the child walks on
        detach(keep_stderr=not args.log)
    return run(args)


def detach(keep_stderr: bool) -> None:
    """The background walker lets go of the opener's session and pipes (stdout may be an MCP wire,
    and a pipe held open keeps whoever reads it waiting); stderr stays only when there is no log."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1) if keep_stderr else (0, 1, 2):
        os.dup2(null, fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
