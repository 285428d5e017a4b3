"""The SDK's internals are reached through emceepee_cli/sdk.py alone, and still do what it says.

No other module imports a private module or name of `mcp` or `mcp_types`, imports around the
adapter what it adapts, or reaches into an SDK object's private attributes. Each internal the
adapter names is held here to what emceepee relies on, against the SDK's public behaviour where
there is one, so a release that moves one fails here first.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

import anyio
import mcp_types as types
import pydantic
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession
from mcp.server import Server
from mcp.shared.message import SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from emceepee_cli import sdk
from emceepee_cli.backends.connect import handshake
from emceepee_cli.calls.resume import RawResult, RawToolsCall
from tests.support import ROOT

PACKAGE = ROOT / "emceepee_cli"
ADAPTER = PACKAGE / "sdk.py"
SDK = ("mcp", "mcp_types")
ADAPTED = {name for name in sdk.__all__ if getattr(sdk, name).__module__.startswith(SDK)}
LEGACY = "2025-11-25"
WAIT_S = 5.0

# ---- the adapter is the only way in ------------------------------------------------------


def _from_sdk(module: str) -> bool:
    return module.split(".")[0] in SDK


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.endswith("__") for part in dotted.split("."))


def _own(value: ast.expr, modules: set[str]) -> bool:
    """`self._x`, `cls._x`, `super()._x`, or a module's that is not the SDK's (`os._exit`)."""
    if isinstance(value, ast.Name):
        return value.id in {"self", "cls", *modules}
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super"


def sdk_internals(source: str) -> list[str]:
    """What a module takes from the SDK's internals by itself: a private module or name it imports,
    a name the adapter adapts imported around it, a private attribute of an object not its own."""
    tree = ast.parse(source)
    found: list[str] = []
    modules: set[str] = set()
    uses_sdk = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _from_sdk(alias.name):
                    uses_sdk = True
                    found += [f"line {node.lineno}: import {alias.name}"] if _private(alias.name) else []
                else:
                    modules.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and _from_sdk(node.module):
            uses_sdk = True
            for alias in node.names:
                if _private(f"{node.module}.{alias.name}") or alias.name in ADAPTED:
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
    if uses_sdk:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and not _own(node.value, modules):
                found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_no_module_but_the_adapter_reaches_an_sdk_internal() -> None:
    reaching = {
        str(path.relative_to(ROOT)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != ADAPTER and "_examples" not in path.parts and (found := sdk_internals(path.read_text()))
    }
    assert reaching == {}, "import these through emceepee_cli/sdk.py, named in its docstring"


def test_the_scan_sees_each_way_in() -> None:
    code = (
        "import mcp.client._probe\nfrom mcp.client.session import _clamp_inbound_ttl\n"
        "from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher\nimport os\n"
        "def f(session, self):\n    os._exit(0); self._a; super()._b; return session._tool_output_schemas\n"
    )
    assert sdk_internals(code) == [
        "line 1: import mcp.client._probe",
        "line 2: from mcp.client.session import _clamp_inbound_ttl",
        "line 3: from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher",
        "line 6: ._tool_output_schemas",
    ]


def test_the_adapter_names_each_internal_it_imports_and_the_sdk_version_it_is_pinned_to() -> None:
    assert sdk.__doc__ is not None
    doc = " ".join(sdk.__doc__.split())
    for node in ast.walk(ast.parse(ADAPTER.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and _from_sdk(node.module):
            for alias in node.names:
                if _private(f"{node.module}.{alias.name}") or alias.name in ADAPTED:
                    assert alias.name in doc, f"{alias.name} is imported but not named"
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for package in ("mcp", "mcp-types"):
        (pin,) = [d for d in dependencies if re.match(rf"{package}>=", d)]
        matched = re.fullmatch(rf"{package}>=(\d+)\.(\d+),<(\d+)\.(\d+)", pin)
        assert matched is not None, f"{pin}: pin one minor version"
        major, minor, upper_major, upper_minor = map(int, matched.groups())
        assert (upper_major, upper_minor) == (major, minor + 1), f"{pin}: pin one minor version"
        assert f"`>={major}.{minor},<{major}.{minor + 1}`" in doc
        assert version(package).startswith(f"{major}.{minor}.")


# ---- each internal still does what the adapter says ----------------------------------------


@asynccontextmanager
async def session_answered_with(answers: dict[str, dict[str, Any]]) -> AsyncIterator[ClientSession]:
    """A ClientSession (not initialized) whose peer answers each request with `answers[method]`."""
    to_session, session_read = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    session_write, from_session = anyio.create_memory_object_stream[SessionMessage | Exception](8)

    async def peer(
        requests: MemoryObjectReceiveStream[SessionMessage | Exception],
        replies: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        async for message in requests:
            assert isinstance(message, SessionMessage)
            request = message.message
            if isinstance(request, types.JSONRPCRequest):
                reply = types.JSONRPCResponse(jsonrpc="2.0", id=request.id, result=answers[request.method])
                await replies.send(SessionMessage(reply))

    async with anyio.create_task_group() as tg:
        tg.start_soon(peer, from_session, to_session)
        async with ClientSession(session_read, session_write) as session:
            yield session
        tg.cancel_scope.cancel()


READ: list[dict[str, Any]] = [
    {"content": [{"type": "text", "text": "x"}], "isError": False},
    {"content": [], "ttlMs": -5, "cacheScope": "private"},  # a later revision's fields, dropped
    {"content": [], "nextResumeToken": "t", "structuredContent": {"a": 1}},  # unknown: kept
    {"content": "not a list"},
    {"content": [{"type": "nope"}]},
    {"content": [], "isError": "maybe"},
]


@pytest.mark.anyio
@pytest.mark.parametrize("result", READ)
async def test_a_result_is_read_as_the_session_reads_it(result: dict[str, Any]) -> None:
    def by_adapter() -> RawResult:
        return RawResult.model_validate(sdk.read_as_session("tools/call", LEGACY, result), by_name=False)

    with anyio.fail_after(WAIT_S):
        async with session_answered_with({"tools/call": result}) as session:
            try:
                read = await session.send_request(RawToolsCall(params={"name": "t"}), RawResult)
            except pydantic.ValidationError as refused:
                with pytest.raises(pydantic.ValidationError) as also:
                    by_adapter()
                assert str(also.value) == str(refused)
                return
    assert by_adapter().model_dump(by_alias=True) == read.model_dump(by_alias=True)


@pytest.mark.anyio
async def test_the_tools_the_session_checks_are_those_with_an_output_schema_or_unlisted() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "number"}}}
    tools = [
        {"name": "typed", "inputSchema": {"type": "object"}, "outputSchema": schema},
        {"name": "plain", "inputSchema": {"type": "object"}},
    ]
    with anyio.fail_after(WAIT_S):
        async with session_answered_with({"tools/list": {"tools": tools}}) as session:
            assert sdk.checks_output(session, "typed")
            await session.list_tools()
            checked = [sdk.checks_output(session, tool) for tool in ("typed", "plain", "unlisted")]
    assert checked == [True, False, True]


@pytest.mark.anyio
async def test_a_backend_in_auto_is_probed_and_speaks_the_newest_era_the_sdk_server_offers() -> None:
    server = Server("sdk")
    to_server, server_read = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    server_write, to_session = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.run, server_read, server_write, server.create_initialization_options())
            async with ClientSession(to_session, to_server) as session:
                await handshake(session, "auto")
                negotiated = session.protocol_version
            tg.cancel_scope.cancel()
    assert negotiated in MODERN_PROTOCOL_VERSIONS
