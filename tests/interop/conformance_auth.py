"""The MCP conformance suite's client for its auth scenarios: emceepee, driven as a host drives it.

The suite runs `<this command> <server-url>` with MCP_CONFORMANCE_SCENARIO (and, for some scenarios,
MCP_CONFORMANCE_CONTEXT: pre-registered credentials) in the environment. This driver:

1. makes a fresh emceepee home whose config has one backend, `cf`, a `url` backend at the scenario's
   server, with `[servers.cf.oauth]` from the context (the client secret only as `${CF_CLIENT_SECRET}`,
   set in serve's environment) and the Client ID Metadata Document URL where the scenario asks for one;
2. sets `$BROWSER` to tests/interop/follow_redirects.py, which walks the authorization URL to
   emceepee's loopback redirect with no person;
3. starts the real `emceepee serve` over stdio (this repository's tree) as a 2025-11-25 host does,
   lists emceepee's tools, the servers and cf's tools, and calls cf's `test-tool` (meta mode:
   `execute_tool`; `--expose direct`: `cf__test-tool`);
4. exits 0 when the call answered "test" (or, where the scenario wants sign-in refused, when emceepee
   refused it), else 1 with the reason and what emceepee and the browser said on stderr.

Every wait is bounded (`--seconds`, below the suite's 30 s client timeout). Run by
tests/interop/run_conformance_auth.sh; see tests/interop/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
FOLLOWER = Path(__file__).resolve().with_name("follow_redirects.py")
SERVER = "cf"
TOOL = "test-tool"
ANSWER = "test"  # what the scenarios' test-tool says
SECRET_VAR = "CF_CLIENT_SECRET"
CIMD_URL = "https://conformance-test.local/client-metadata.json"  # the id auth/basic-cimd expects
ENVELOPE = ("events_since_last_response", "pending_client_action")
ACTIVITY_MS = 1000  # await_activity's wait for a backend still starting or signing in


@dataclass(frozen=True)
class Plan:
    """What a scenario needs from the config, and what a good emceepee does with it."""

    cimd: bool = False  # sign in as the Client ID Metadata Document URL
    refused: bool = False  # the scenario's server must not get a successful sign-in


PLANS: dict[str, Plan] = {
    "auth/basic-cimd": Plan(cimd=True),
    "auth/resource-mismatch": Plan(refused=True),  # the PRM names another resource
    "auth/scope-retry-limit": Plan(refused=True),  # every token is refused with 403 insufficient_scope
}


class DriverError(Exception):
    """Why the scenario's tool could not be called through emceepee."""


class Say:
    """Progress lines on stderr, each stamped with the seconds since the driver started."""

    def __init__(self) -> None:
        self.start = time.monotonic()

    def __call__(self, line: str) -> None:
        sys.stderr.write(f"[driver +{time.monotonic() - self.start:5.1f}s] {line}\n")
        sys.stderr.flush()


def context() -> dict[str, Any]:
    """MCP_CONFORMANCE_CONTEXT, or {} when the scenario has none."""
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    found = json.loads(raw) if raw else {}
    if not isinstance(found, dict):
        raise DriverError(f"MCP_CONFORMANCE_CONTEXT is not a JSON object: {raw!r}")
    return found


def config_text(url: str, given: dict[str, Any], plan: Plan, args: argparse.Namespace) -> str:
    """The config: one url backend, and its sign-in table when there is something to put in it."""
    lines = []
    if args.expose == "direct":
        lines += ["[defaults]", 'expose = "both"', ""]
    lines += [f"[servers.{SERVER}]", f"url = {json.dumps(url)}"]
    if args.protocol:  # the era emceepee speaks to the backend (else emceepee's default, the handshake era)
        lines.append(f"protocol = {json.dumps(args.protocol)}")
    if args.bearer:  # the driver's own check: a static token, so no sign-in happens
        lines.append(f"headers = {{ Authorization = {json.dumps('Bearer ' + args.bearer)} }}")
    oauth = []
    if "client_id" in given:
        oauth.append(f"client_id = {json.dumps(given['client_id'])}")
    if "client_secret" in given:
        oauth.append(f'client_secret = "${{{SECRET_VAR}}}"')
    if plan.cimd:
        oauth.append(f"client_metadata_url = {json.dumps(CIMD_URL)}")
    if oauth:
        lines += ["", f"[servers.{SERVER}.oauth]", *oauth]
    return "\n".join(lines) + "\n"


def browser_command(home: Path) -> Path:
    """An executable for `$BROWSER` (webbrowser takes one program, no arguments): the follower, logging
    to a file in `home` so the driver can show what it did."""
    script = home / "browser.sh"
    follower = f"{json.dumps(sys.executable)} {json.dumps(str(FOLLOWER))}"
    script.write_text(f'#!/bin/sh\nexec {follower} --log {json.dumps(str(home / "browser.log"))} "$@"\n')
    script.chmod(0o700)
    return script


def serve_params(home: Path, given: dict[str, Any], src: Path) -> StdioServerParameters:
    """`emceepee serve` from the tree `src`, in `home`, as a host starts it."""
    env = {
        "EMCEEPEE_HOME": str(home),
        "BROWSER": str(browser_command(home)),
        "PYTHONPATH": str(src),
        "PYTHONDONTWRITEBYTECODE": "1",  # leave the tree as it was
    }
    if "client_secret" in given:
        env[SECRET_VAR] = str(given["client_secret"])
    # cwd: `python -m` looks in the working folder first, which may hold another tree
    return StdioServerParameters(
        command=sys.executable, args=["-m", "emceepee_cli", "serve"], env=env, cwd=home
    )


def own(result: Any) -> dict[str, Any]:
    """A meta-tool's own structuredContent (without the envelope)."""
    structured = result.structured_content or {}
    return {k: v for k, v in structured.items() if k not in ENVELOPE}


def texts(result: Any) -> list[str]:
    """A result's text blocks, without emceepee's envelope blocks."""
    blocks = [b.text for b in result.content if getattr(b, "type", "") == "text"]
    return [t for t in blocks if not any(t.startswith('{"' + key + '":') for key in ENVELOPE)]


def pending_urls(result: Any) -> list[str]:
    """The URLs of questions emceepee parked for the person (a sign-in link shows up there)."""
    pending = (result.structured_content or {}).get("pending_client_action") or {}
    return [str(q.get("url")) for q in pending.get("elicitations", []) if q.get("url")]


class Host:
    """A 2025-11-25 host with no elicitation support, driving one `serve` through its meta-tools."""

    def __init__(self, client: Client, say: Callable[[str], None]) -> None:
        self.client = client
        self.say = say
        self.seen_urls: set[str] = set()

    async def tool(self, name: str, args: dict[str, Any]) -> Any:
        result = await self.client.call_tool(name, args)
        for url in pending_urls(result):
            if url not in self.seen_urls:
                self.seen_urls.add(url)
                self.say(f"emceepee parked a URL for the person: {url[:120]}")
        return result

    async def server_row(self) -> dict[str, Any]:
        rows = own(await self.tool("list_servers", {})).get("servers", [])
        for row in rows:
            if row.get("name") == SERVER:
                return dict(row)
        raise DriverError(f"list_servers does not show {SERVER!r}: {rows}")

    async def backend_tools(self) -> list[dict[str, Any]]:
        """cf's tools once it is ready; DriverError when emceepee reports it failed."""
        last: str | None = "(not yet listed)"
        while True:
            listing = await self.tool("list_tools", {"server": SERVER})
            if listing.is_error:
                raise DriverError(f"list_tools({SERVER}) refused: {' '.join(texts(listing))[:500]}")
            groups = own(listing).get("servers", [])
            group = groups[0] if groups else {}
            if "tools" in group:
                return list(group["tools"])
            if group.get("status") != last:
                last = group.get("status")
                self.say(f"{SERVER} is {last}: {json.dumps(group)[:300]}")
            if last == "failed":
                raise DriverError(f"emceepee reports {SERVER} failed: {json.dumps(group)}")
            await self.tool("await_activity", {"timeout_ms": ACTIVITY_MS})  # until serve says more

    async def call_meta(self, timeout_ms: int) -> Any:
        args = {"server": SERVER, "tool": TOOL, "args": {}, "timeout_ms": timeout_ms}
        result = await self.tool("execute_tool", args)
        task = own(result).get("proxy_task")
        while task is not None:
            self.say(f"the call is task {task['task_id']} ({task.get('status_message', 'working')}); waiting")
            result = await self.tool(
                "get_task_result", {"task_id": task["task_id"], "timeout_ms": timeout_ms}
            )
            found = own(result).get("task")
            task = found if isinstance(found, dict) and found.get("status") == "working" else None
        return result

    async def call_direct(self, tools: list[dict[str, Any]]) -> Any:
        names = {t["name"]: t.get("direct_name") for t in tools}
        direct = names.get(TOOL)
        if not direct:
            raise DriverError(f"list_tools shows no direct name for {TOOL!r}: {names}")
        listed = {t.name for t in (await self.client.list_tools()).tools}
        if direct not in listed:
            raise DriverError(f"{direct!r} is not on the host's tools/list: {sorted(listed)}")
        return await self.tool(direct, {})


async def drive(host: Host, expose: str, seconds: float) -> str:
    """List, then call the scenario's tool; its text."""
    listed = {t.name for t in (await host.client.list_tools()).tools}
    host.say(f"emceepee's tools: {len(listed)} ({', '.join(sorted(listed)[:6])}, ...)")
    row = await host.server_row()
    host.say(f"list_servers: {SERVER} is {row.get('status')}")
    tools = await host.backend_tools()
    host.say(f"{SERVER}'s tools: {[t['name'] for t in tools]}")
    if TOOL not in {t["name"] for t in tools}:
        raise DriverError(f"{SERVER} has no {TOOL!r}")
    result = await (host.call_meta(int(seconds * 1000)) if expose == "meta" else host.call_direct(tools))
    said = " ".join(texts(result))
    if result.is_error:
        raise DriverError(f"the call of {TOOL} failed: {said[:500]}")
    return said


def show_file(say: Callable[[str], None], path: Path, lines: int = 30) -> None:
    if path.is_file():
        tail = path.read_text(errors="replace").splitlines()[-lines:]
        say(f"--- {path.name} (last {len(tail)} lines)")
        for line in tail:
            say(f"    {line}")


def show_diagnostics(say: Callable[[str], None], home: Path) -> None:
    """What the browser and emceepee's logs said, for a run that failed."""
    show_file(say, home / "browser.log")
    logs = home / "data" / "logs"
    for log in sorted(logs.glob("*")) if logs.is_dir() else []:
        show_file(say, log)


async def run(url: str, args: argparse.Namespace, home: Path, say: Say) -> str:
    """Start serve in `home` and drive it; the tool's text. Bounded by `seconds`."""
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    plan = PLANS.get(scenario, Plan())
    given = context()
    text = config_text(url, given, plan, args)
    (home / "config.toml").write_text(text)
    say(
        f"scenario {scenario or '(none)'}; config:\n"
        + text.replace(str(given.get("client_secret", "\0")), "***")
    )
    with anyio.fail_after(args.seconds):
        async with Client(serve_params(home, given, args.src), mode="legacy") as client:
            return await drive(Host(client, say), args.expose, args.seconds)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="emceepee as the conformance suite's auth client")
    parser.add_argument("url", help="the scenario's MCP server URL")
    parser.add_argument(
        "--expose", choices=("meta", "direct"), default="meta", help="how the host calls the tool"
    )
    parser.add_argument("--seconds", type=float, default=25.0, help="bound on the whole run")
    parser.add_argument("--protocol", choices=("legacy", "auto", "modern"), help="the backend's `protocol`")
    parser.add_argument("--bearer", help="send this static token instead of signing in (checks the driver)")
    parser.add_argument("--src", type=Path, default=ROOT, help="the emceepee tree serve runs (this one)")
    parser.add_argument(
        "--keep-home", action="store_true", help="keep the emceepee home (its path is printed)"
    )
    return parser.parse_args(argv)


def outcome(plan: Plan, said: str | None, error: str | None, say: Callable[[str], None]) -> int:
    """The exit status: did emceepee do what the scenario wants?"""
    if plan.refused:
        if error is None:
            say(f"FAIL: emceepee signed in and called {TOOL} where the scenario wants sign-in refused")
            return 1
        say(f"OK: emceepee refused: {error}")
        return 0
    if error is not None:
        say(f"FAIL: {error}")
        return 1
    if ANSWER not in (said or ""):
        say(f"FAIL: {TOOL} answered {said!r}, not {ANSWER!r}")
        return 1
    say(f"OK: {TOOL} answered {said!r}")
    return 0


def main(argv: list[str]) -> int:
    args = parse(argv)
    say = Say()
    plan = PLANS.get(os.environ.get("MCP_CONFORMANCE_SCENARIO", ""), Plan())
    home = Path(tempfile.mkdtemp(prefix="emceepee-conformance-"))
    said: str | None = None
    error: str | None = None
    try:
        said = anyio.run(run, args.url, args, home, say)
    except* TimeoutError:
        error = f"no answer within {args.seconds:.0f} s"
    except* Exception as group:  # noqa: BLE001 - DriverError, MCPError, a serve that will not start: all said
        error = "; ".join(f"{type(e).__name__}: {e}" for e in leaves(group))
    status = outcome(plan, said, error, say)
    if status != 0 or error is not None:
        show_diagnostics(say, home)
    if args.keep_home:
        say(f"emceepee home kept: {home}")
    else:
        shutil.rmtree(home, ignore_errors=True)
    return status


def leaves(group: BaseExceptionGroup[Exception]) -> list[Exception]:
    """The exceptions in a (nested) group: the SDK wraps what a session raises, often twice."""
    found: list[Exception] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found += leaves(exc)
        else:
            found.append(exc)
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
