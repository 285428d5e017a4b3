"""Host input that reaches the config and the tool listing, over a real `emceepee serve`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from emceepee_cli.config import load_config
from tests.support import hostile_table, payload, run_cli, serving, still_answering, texts, write_config

pytestmark = pytest.mark.anyio

ALLOW_CHANGES = '[defaults]\nmodel_adds_servers = "allow"\n'  # the user lets the model add servers

BACKTRACKS = "a" * 40 + "!"  # `(a|aa)+$` tries every split of the a's before failing at the "!"


async def test_a_backtracking_pattern_is_refused_within_its_budget_and_serve_stays_responsive(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "config.toml", hostile_table("h", "--describe", BACKTRACKS))
    async with serving(config) as client:
        with anyio.fail_after(30):
            assert len(payload(await client.call_tool("list_tools", {}))["servers"][0]["tools"]) > 5
        listed = anyio.Event()
        pings = 0

        async def catastrophic() -> None:
            result = await client.call_tool("list_tools", {"pattern": "(a|aa)+$"})
            listed.set()
            assert result.is_error, result
            assert "took more than" in texts(result)[0] and "Simplify it" in texts(result)[0]

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(catastrophic)
                while not listed.is_set():  # each ping is answered while the pattern is matched
                    await still_answering(client)
                    pings += 1
        assert pings >= 3, "the pings waited for the pattern"

        with anyio.fail_after(30):
            # `(a+)+$`, the textbook case for `re`, is handled quickly by the matcher: no error.
            nested = payload(await client.call_tool("list_tools", {"pattern": "(a+)+$"}))
            assert nested["servers"] == []  # no server has a match
            found = payload(await client.call_tool("list_tools", {"pattern": "^ECHO$"}))
            assert [t["name"] for t in found["servers"][0]["tools"]] == ["echo"]
            for pattern, said in (
                ("a{4294967294}", "multiply past"),
                ("(?:a{1000}){1000}", "multiply past"),
                ("x" * 501, "the limit is 500"),
                ("(", "not a valid regular expression"),
            ):
                refused = await client.call_tool("list_tools", {"pattern": pattern})
                assert refused.is_error and said in texts(refused)[0], (pattern, texts(refused))
            await still_answering(client)


async def test_list_servers_shows_one_row_per_broken_server_with_all_its_problems(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        hostile_table("h"),
        '[servers.bad]\ncommand = 5\nargs = "x"\nprotocol = "v9"\n',
        '[servers.worse]\ncomand = "x"\n',
    )
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_tools", {})
            rows = payload(await client.call_tool("list_servers", {}))["servers"]
            missing = await client.call_tool("execute_tool", {"server": "bad", "tool": "t"})
    assert sorted(row["name"] for row in rows) == ["bad", "h", "worse"]
    bad = next(row for row in rows if row["name"] == "bad")
    assert bad["status"] == "failed"
    for field in ("command", "args", "protocol"):
        assert f"field '{field}'" in bad["last_error"], bad
    worse = next(row for row in rows if row["name"] == "worse")
    assert (
        "did you mean 'command'" in worse["last_error"]
        and "needs a non-empty 'command'" in worse["last_error"]
    )
    assert missing.is_error and all(
        f"field '{f}'" in texts(missing)[0] for f in ("command", "args", "protocol")
    )


async def test_add_server_refuses_a_name_ending_in_a_newline_and_makes_no_file(
    tmp_path: Path, emceepee_home: Path
) -> None:
    config = write_config(tmp_path / "config.toml", ALLOW_CHANGES, hostile_table("h"))
    async with serving(config) as client:
        with anyio.fail_after(30):
            await client.call_tool("list_tools", {})
            for persist in (True, False):
                added = await client.call_tool(
                    "add_server", {"name": "abc\n", "command": sys.executable, "persist": persist}
                )
                assert added.is_error and "bad name" in texts(added)[0], texts(added)
            names = [row["name"] for row in payload(await client.call_tool("list_servers", {}))["servers"]]
            await still_answering(client)
    assert names == ["h"]
    assert list(load_config(config).servers) == ["h"]
    assert [p.name for p in (emceepee_home / "data" / "logs").iterdir()] == ["h.log"]


async def test_add_server_from_serve_racing_cli_adds_loses_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path / "config.toml", ALLOW_CHANGES, hostile_table("h"))
    from_cli = [f"cli{i}" for i in range(6)]
    from_serve = [f"serve{i}" for i in range(6)]
    async with serving(config) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_tools", {})

            async def add_over_serve(name: str) -> None:
                # A command that is not there: the entry is written, the backend fails at once.
                added = await client.call_tool(
                    "add_server", {"name": name, "command": "emceepee-test-no-such"}
                )
                assert payload(added)["persisted"] is True

            async def add_with_cli(name: str) -> None:
                done = await anyio.to_thread.run_sync(
                    lambda: run_cli("servers", "add", name, "--config", str(config), "--", "cmd")
                )
                assert done.returncode == 0, done.stderr

            async with anyio.create_task_group() as tg:
                for name in from_cli:
                    tg.start_soon(add_with_cli, name)
                for name in from_serve:
                    tg.start_soon(add_over_serve, name)
            removed = payload(await client.call_tool("remove_server", {"name": "serve0"}))
            await still_answering(client)
    assert removed["removed_from_config"] is True
    on_disk = json.dumps(sorted(load_config(config).servers))
    assert on_disk == json.dumps(sorted(["h", *from_cli, *from_serve[1:]]))
