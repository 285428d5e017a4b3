"""The SDK dispatcher, adapted (backends/dispatcher.py): an error's origin survives, whatever its code.

Holds the SDK internal it relies on (`_resolve_pending` hands a peer's answer to its waiter, and
only that) to account: these fail if an SDK upgrade moves it.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import MCPError
from mcp.shared.message import SessionMessage

from emceepee_cli.backends.dispatcher import BackendDispatcher
from emceepee_cli.backends.failures import Answered, TooLong, closed

pytestmark = pytest.mark.anyio


async def _ignore(*args: Any) -> Any:
    return None


async def answered_with(reply: types.ErrorData | None) -> BaseException:
    """What a request raises when the peer answers it with `reply` (None: the peer's stream ends)."""
    to_us, our_read = anyio.create_memory_object_stream[SessionMessage | Exception](1)
    our_write, from_us = anyio.create_memory_object_stream[SessionMessage](1)
    dispatcher = BackendDispatcher(our_read, our_write)
    raised: BaseException | None = None
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run, _ignore, _ignore)

            async def peer() -> None:
                request = (await from_us.receive()).message
                assert isinstance(request, types.JSONRPCRequest)
                if reply is None:
                    await to_us.aclose()
                else:
                    await to_us.send(
                        SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request.id, error=reply))
                    )

            tg.start_soon(peer)
            try:
                await dispatcher.send_raw_request("tools/call", {"name": "t"})
            except Exception as exc:  # noqa: BLE001 - what it raised is the point
                raised = exc
            to_us.close()
    assert raised is not None
    return raised


async def test_a_peer_answering_minus_32000_is_its_answer_not_a_closed_connection() -> None:
    raised = await answered_with(
        types.ErrorData(code=types.CONNECTION_CLOSED, message="quota", data={"n": 1})
    )
    assert isinstance(raised, Answered)
    assert (raised.code, raised.message, raised.data) == (-32000, "quota", {"n": 1})
    assert not closed(raised)


async def test_the_connection_ending_is_the_sdks_plain_connection_closed() -> None:
    raised = await answered_with(None)
    assert type(raised) is MCPError and raised.code == types.CONNECTION_CLOSED
    assert closed(raised)


async def test_an_error_emceepee_made_at_the_pipe_raises_what_it_carries() -> None:
    refusal = TooLong(64 * 1024 * 1024)
    raised = await answered_with(types.ErrorData(code=types.INTERNAL_ERROR, message="too long", data=refusal))
    assert raised is refusal and "over 64 MiB" in str(raised)
