"""The model's add_server and remove_server, over a real `emceepee serve`, edit the user's commented
config.toml in place: the added table is all that changes, and removing it gives the file back
byte for byte."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from tests.support import hostile_table, payload, serving, still_answering, write_config

pytestmark = pytest.mark.anyio


async def test_add_server_and_remove_server_change_only_their_table(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        '# my config, by hand\n[defaults]\nmodel_adds_servers = "allow"   # I trust it\n',
        "# the one I use\n" + hostile_table("h").replace("\nargs", "   # this python\nargs"),
        "# nothing after this\n",
    )
    before = config.read_bytes()
    async with serving(config) as client:
        with anyio.fail_after(60):
            await client.call_tool("list_tools", {})
            added = payload(
                await client.call_tool("add_server", {"name": "added", "command": sys.executable})
            )
            with_added = config.read_text()
            removed = payload(await client.call_tool("remove_server", {"name": "added"}))
            await still_answering(client)
    assert added["persisted"] is True and removed["removed_from_config"] is True
    table = f'\n[servers.added]\ncommand = "{sys.executable}"\n'
    assert with_added == before.decode().replace("\n\n# nothing after", f"\n{table}\n# nothing after", 1)
    assert config.read_bytes() == before
