"""A bug inside a request handler still gets the host an answer: -32603, briefly, with the
traceback in serve's log (the SDK alone would answer with code 0 and the exception's own text)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from mcp import MCPError

from emceepee_cli.session.native_lists import Native
from tests.support import emceepee, example_table, payload, write_config

pytestmark = pytest.mark.anyio


async def test_a_handler_that_raises_answers_internal_error_and_the_session_carries_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    config = write_config(tmp_path / "config.toml", example_table("echo", "echo.py"))
    async with emceepee(config) as client:
        with anyio.fail_after(30):
            await client.list_tools()
            await client.list_prompts()

            def broken(self: Native) -> object:  # stands in for a bug emceepee does not know of
                raise KeyError("secret internals")

            monkeypatch.setattr(Native, "list_prompts", broken)
            with pytest.raises(MCPError) as raised:
                await client.list_prompts()
            assert raised.value.error.code == -32603
            assert raised.value.error.message == (
                "emceepee failed inside prompts/list (KeyError); its stderr log has the details"
            )
            assert "secret internals" in caplog.text  # in the log, not on the wire
            monkeypatch.undo()
            await client.send_ping()
            assert payload(await client.call_tool("list_servers", {}))["servers"][0]["name"] == "echo"
