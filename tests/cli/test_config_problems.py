"""A config problem names the file it is in, whatever that file is called (serve's side included)."""

from __future__ import annotations

from pathlib import Path

import anyio

from emceepee_cli.config import load_config
from tests.support import emceepee, payload, write_config


def test_a_problem_names_its_own_file(tmp_path: Path) -> None:
    config = write_config(tmp_path / "work.toml", '[servers.x]\nurl = "ftp://x"\n')
    assert [str(p) for p in load_config(config).problems] == [
        "work.toml: server 'x', field 'url': must start with http:// or https:// (got 'ftp://x')"
    ]


def test_list_servers_names_the_file_serve_was_given(tmp_path: Path) -> None:
    config = write_config(tmp_path / "team.toml", "[server]\n")

    async def listed() -> dict[str, object]:
        async with emceepee(config) as client:
            await client.list_tools()
            return payload(await client.call_tool("list_servers", {}))

    problems = anyio.run(listed)["config_problems"]
    assert problems == ["team.toml: field 'server': unknown top-level table; did you mean 'servers'?"]
