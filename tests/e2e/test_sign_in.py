"""Signing in to a remote backend from the real `emceepee serve`, after a host's other calls: the
browser is opened; the link is also a question, forwarded to a host that takes URL elicitation or
parked for `emceepee pending`; calls meanwhile say how to sign in; tokens land in a 0600 file and
nowhere else; refresh renews them without the person, and a refused refresh asks again."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from emceepee_cli.signin import store
from tests.signin.parts import Mock, browser, opened, running, sign_in_log
from tests.support import (
    envelope,
    example_table,
    payload,
    run_cli,
    serving,
    still_answering,
    texts,
    until,
    write_config,
)

pytestmark = pytest.mark.anyio


def config(tmp_path: Path, mock: Mock, **oauth: Any) -> Path:
    remote = f'[servers.tracker]\nurl = "{mock.base}/mcp"\n'
    if oauth:
        remote += "[servers.tracker.oauth]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in oauth.items())
    return write_config(tmp_path / "config.toml", example_table("echo", "echo.py"), remote)


def call(tool: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"server": "tracker", "tool": tool, "args": args or {}, "timeout_ms": 20_000}


async def warm_up(client: Client) -> None:
    """What a host does first: list, call another backend."""
    await client.list_tools()
    await client.call_tool("list_servers", {})
    assert texts(
        await client.call_tool("execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "hi"}})
    )


async def status_of(client: Client, server: str) -> dict[str, Any]:
    rows = payload(await client.call_tool("list_servers", {}))["servers"]
    return next(row for row in rows if row["name"] == server)


async def until_status(client: Client, server: str, *wanted: str) -> dict[str, Any]:
    """The server's row once it is in one of the `wanted` states: between looks, serve's events
    (a backend connecting or failing is one) wake the wait."""
    while (row := await status_of(client, server))["status"] not in wanted:
        await client.call_tool("await_activity", {"timeout_ms": 1000})
    return row


def kept_tokens() -> dict[str, Any]:
    return dict(json.loads(store.file_for("tracker").read_text())["tokens"])


def nowhere_else(emceepee_home: Path, *secrets: str) -> None:
    """No file of emceepee's but the token file holds these (the journal, logs, the config)."""
    for path in emceepee_home.rglob("*"):
        if path.is_file() and path != store.file_for("tracker"):
            content = path.read_bytes()
            for secret in secrets:
                assert secret.encode() not in content, path


async def test_serve_signs_in_through_the_browser_and_keeps_the_tokens_private(
    tmp_path: Path, emceepee_home: Path
) -> None:
    with running("--scopes-supported", "read offline_access") as mock:
        async with serving(config(tmp_path, mock), env=browser(tmp_path)) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                await until_status(client, "tracker", "ready")
                whoami = await client.call_tool("execute_tool", call("whoami"))
                echo = await client.call_tool("execute_tool", call("echo", {"text": "signed"}))
                await still_answering(client)
        seen = sign_in_log(mock)
    assert texts(whoami) == ["read offline_access"] and texts(echo) == ["signed"]
    assert len(opened(tmp_path)) == 1
    authorize = next(entry["params"] for entry in seen if entry["endpoint"] == "authorize")
    assert authorize["resource"] == f"{mock.base}/mcp" and authorize["code_challenge_method"] == "S256"
    path = store.file_for("tracker")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    tokens = kept_tokens()
    nowhere_else(emceepee_home, tokens["access_token"], tokens["refresh_token"])


async def test_without_a_browser_the_link_reaches_a_host_that_takes_url_elicitation(tmp_path: Path) -> None:
    asked: list[types.ElicitRequestURLParams] = []

    async def form(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        asked.append(params)
        async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as http:  # the person opens it
            await http.get(params.url)
        return types.ElicitResult(action="accept")

    with running() as mock:
        env = browser(tmp_path, looks=False)
        async with serving(config(tmp_path, mock), env=env, elicitation_callback=form) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                await until_status(client, "tracker", "ready")
                whoami = await client.call_tool("execute_tool", call("whoami"))
                pending = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
    assert texts(whoami) == [""] and len(asked) == 1
    assert "Sign in to 'tracker'" in asked[0].message and asked[0].url == opened(tmp_path)[0]
    assert pending == []  # settled once the redirect came


async def test_with_a_bare_host_the_link_is_pending_and_calls_say_how_to_sign_in(tmp_path: Path) -> None:
    with running() as mock:
        async with serving(config(tmp_path, mock), env=browser(tmp_path, looks=False)) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                await until(lambda: bool(opened(tmp_path)))
                url = opened(tmp_path)[0]
                refused = await client.call_tool("execute_tool", call("whoami"))
                other = await client.call_tool(
                    "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "y"}}
                )
                listed = run_cli("pending")
                pending = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
                async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as http:
                    await http.get(url)  # the person opens the link `pending` showed
                await until_status(client, "tracker", "ready")
                whoami = await client.call_tool("execute_tool", call("whoami"))
                after = payload(await client.call_tool("get_elicitations", {}))["elicitations"]
    assert refused.is_error
    said = texts(refused)[0]
    assert "waiting for you to sign in" in said and url in said and "emceepee auth login tracker" in said
    assert listed.returncode == 0 and url in listed.stdout, listed
    riding = envelope(other).get("pending_client_action", {}).get("elicitations", [])
    assert [q["url"] for q in riding] == [url]  # every reply carries the link while it waits
    [question] = pending
    assert question["server"] == "tracker" and question["url"] == url and question["correlation"] == "sign_in"
    assert texts(whoami) == [""] and after == []


async def test_a_refused_sign_in_fails_the_backend_once_with_what_to_run(tmp_path: Path) -> None:
    with running("--deny") as mock:
        async with serving(config(tmp_path, mock), env=browser(tmp_path)) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                row = await until_status(client, "tracker", "failed")
                refused = await client.call_tool("execute_tool", call("whoami"))
                echo = await client.call_tool(
                    "execute_tool", {"server": "echo", "tool": "echo", "args": {"text": "x"}}
                )
                await still_answering(client)
        seen = sign_in_log(mock)
    assert "access_denied" in row["last_error"] and refused.is_error
    assert "emceepee auth login tracker" in " ".join(texts(refused))
    assert texts(echo) == ["x"]
    assert [entry["endpoint"] for entry in seen].count("authorize") == 1  # not asked again and again
    assert not store.file_for("tracker").exists() or "tokens" not in json.loads(
        store.file_for("tracker").read_text()
    )


async def test_tokens_are_refreshed_before_expiry_without_the_person(tmp_path: Path) -> None:
    with running("--token-ttl", "30") as mock:  # within the refresh margin: every request refreshes
        async with serving(config(tmp_path, mock), env=browser(tmp_path)) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                await until_status(client, "tracker", "ready")
                first = await client.call_tool("execute_tool", call("whoami"))
                second = await client.call_tool("execute_tool", call("echo", {"text": "again"}))
        grants = [e["params"].get("grant_type") for e in sign_in_log(mock) if e["endpoint"] == "token"]
    assert not first.is_error and texts(second) == ["again"]
    assert grants[0] == "authorization_code" and "refresh_token" in grants[1:]
    assert len(opened(tmp_path)) == 1  # the person was asked once


async def test_a_refused_refresh_asks_the_person_again(tmp_path: Path) -> None:
    with running("--token-ttl", "30", "--refuse-refresh") as mock:
        async with serving(config(tmp_path, mock), env=browser(tmp_path)) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                await until_status(client, "tracker", "ready")
                echo = await client.call_tool("execute_tool", call("echo", {"text": "still"}))
                await still_answering(client)
    assert texts(echo) == ["still"]
    assert len(opened(tmp_path)) >= 2  # signed in again through the browser


def test_the_token_folder_follows_emceepee_home(emceepee_home: Path) -> None:
    assert os.path.commonpath([store.folder(), emceepee_home]) == str(emceepee_home)


async def test_a_call_needing_more_scope_steps_up_through_the_browser(tmp_path: Path) -> None:
    with running("--scopes-supported", "read", "--step-up", "admin") as mock:
        async with serving(config(tmp_path, mock), env=browser(tmp_path)) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                await until_status(client, "tracker", "ready")
                echo = await client.call_tool("execute_tool", call("echo", {"text": "before"}))
                whoami = await client.call_tool("execute_tool", call("whoami"))
                again = await client.call_tool("execute_tool", call("whoami"))
        scopes = [e["params"].get("scope") for e in sign_in_log(mock) if e["endpoint"] == "authorize"]
    assert texts(echo) == ["before"]
    assert set(texts(whoami)[0].split()) == {"read", "admin"} and texts(again) == texts(whoami)
    assert len(scopes) == 2 and set((scopes[1] or "").split()) >= {"read", "admin"}
    assert len(opened(tmp_path)) == 2


async def test_a_sign_in_the_host_declines_fails_the_backend_until_someone_signs_in(tmp_path: Path) -> None:
    async def decline(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    with running() as mock:
        env = browser(tmp_path, looks=False)
        async with serving(config(tmp_path, mock), env=env, elicitation_callback=decline) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                row = await until_status(client, "tracker", "failed")
                refused = await client.call_tool("execute_tool", call("whoami"))
                await still_answering(client)
    assert "declined" in row["last_error"] and refused.is_error
    assert "emceepee auth login tracker" in " ".join(texts(refused))


async def test_a_sign_in_from_the_terminal_starts_a_backend_whose_sign_in_failed(tmp_path: Path) -> None:
    async def decline(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    with running() as mock:
        served = tmp_path / "served"
        served.mkdir()
        cfg = config(tmp_path, mock)
        async with serving(cfg, env=browser(served, looks=False), elicitation_callback=decline) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                await until_status(client, "tracker", "failed")
                env = {**os.environ, **browser(tmp_path)}
                login = await anyio.to_thread.run_sync(
                    lambda: run_cli("auth", "login", "tracker", "--config", str(cfg), env=env)
                )
                await until_status(client, "tracker", "ready")
                whoami = await client.call_tool("execute_tool", call("whoami"))
    assert login.returncode == 0, login
    assert not whoami.is_error and len(opened(tmp_path)) == 1


async def test_metadata_naming_another_resource_is_refused_saying_so(tmp_path: Path) -> None:
    with running("--claim-resource", "https://elsewhere.example/mcp") as mock:
        async with serving(config(tmp_path, mock), env=browser(tmp_path)) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                row = await until_status(client, "tracker", "failed")
        seen = sign_in_log(mock)
    assert "Signing in to 'tracker' failed" in row["last_error"] and "elsewhere.example" in row["last_error"]
    assert opened(tmp_path) == [] and seen == []  # no token is asked for another resource


async def test_a_legacy_sse_backend_signs_in_the_same_way(tmp_path: Path) -> None:
    with running("--sse") as mock:
        table = f'[servers.tracker]\nurl = "{mock.base}/sse"\ntransport = "sse"\n'
        cfg = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"), table)
        async with serving(cfg, env=browser(tmp_path)) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                await until_status(client, "tracker", "ready")
                echo = await client.call_tool("execute_tool", call("echo", {"text": "over sse"}))
        authorize = next(e["params"] for e in sign_in_log(mock) if e["endpoint"] == "authorize")
    assert texts(echo) == ["over sse"] and authorize["resource"] == f"{mock.base}/sse"
    assert len(opened(tmp_path)) == 1


async def test_a_scope_the_account_is_not_granted_fails_that_call_only(tmp_path: Path) -> None:
    with running("--scopes-supported", "read", "--step-up", "admin", "--withhold", "admin") as mock:
        async with serving(config(tmp_path, mock), env=browser(tmp_path)) as client:
            with anyio.fail_after(60):
                await warm_up(client)
                await until_status(client, "tracker", "ready")
                whoami = await client.call_tool("execute_tool", call("whoami"))
                echo = await client.call_tool("execute_tool", call("echo", {"text": "still here"}))
                row = await status_of(client, "tracker")
    assert whoami.is_error
    said = " ".join(texts(whoami))
    assert "HTTP 403" in said and "insufficient_scope" in said and "permission" in said
    assert texts(echo) == ["still here"] and row["status"] == "ready"
    assert len(opened(tmp_path)) == 2  # signed in, then asked once more for the scope: not again and again
