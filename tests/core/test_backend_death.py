"""A backend's death, as the requests on their way to it are told: the exit status and the last
stderr lines of that death, whenever they reach it, never the restart that follows."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession

from emceepee_cli.backends.backend import Status
from emceepee_cli.errors import BackendError, EmceepeeError
from tests.core.parts import hostile, parts, started

pytestmark = pytest.mark.anyio

WAIT_S = 30


def tool(name: str, **args: Any) -> Callable[[ClientSession], Awaitable[types.CallToolResult]]:
    return lambda session: session.call_tool(name, args)


async def test_a_request_that_reaches_a_backend_after_it_died_fails_with_that_death(tmp_path: Path) -> None:
    async with parts(tmp_path) as p:
        h = (await started(p, hostile("h")))["h"]
        with anyio.fail_after(WAIT_S):
            with pytest.raises(BackendError) as died:
                await h.request("tools/call 'die'", tool("die", code=3))
            status = h.status
            # Sent its way while it was ready (as a call that was promoted, or a chain's next step),
            # this one reaches it only now: the backend is restarting, and its death is why.
            with pytest.raises(EmceepeeError) as late:
                await h.request("tools/call 'echo'", tool("echo", text="late"))
            await h.wait_ready(WAIT_S)
            back = await h.request("tools/call 'echo'", tool("echo", text="back"))
        h.stop()
    assert status == Status.RESTARTING
    assert died.value.message.startswith("Backend 'h' exited during tools/call 'die' (exit code 3;")
    assert "hostile: dying on request" in died.value.message
    assert late.value.message.startswith("Backend 'h' exited before tools/call 'echo' was sent (exit code 3;")
    assert "hostile: dying on request" in late.value.message and "restarting" not in late.value.message
    assert isinstance(back.content[0], types.TextContent) and back.content[0].text == "back"
