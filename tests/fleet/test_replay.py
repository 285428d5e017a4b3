"""A front outlives its fleet: what it remembers of the host's session (fleet/replay.py's Book,
fed hostile lines), how it cuts both directions into whole lines (fleet/relay.py), and, over real
processes, a fleet killed with calls in flight on two hosts, the host's answer to a question of
the dead fleet, a fleet that keeps dying, and a 2026-07-28 host, which has no handshake to replay."""

from __future__ import annotations

import json
import os
import random
import re
import signal
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from emceepee_cli.fleet.relay import FIRST, HOLD_BYTES, MORE, WHOLE, FleetLines, HostLines
from emceepee_cli.fleet.replay import (
    CALL_LOST,
    ID_SCAN_BYTES,
    INTERNAL_ERROR,
    PRIVATE_PREFIX,
    Book,
    Replayed,
    head_id,
)
from emceepee_cli.processes import HAVE_PROC
from tests.fleet.fronts import Front, fleet_config, fleets_of, front
from tests.support import Gate, LineHost, alive, example_table, modern_meta, until, write_config

pytestmark = pytest.mark.anyio
needs_proc = pytest.mark.skipif(not HAVE_PROC, reason="tells a fleet's processes apart through /proc")

VERSION = "2025-11-25"
INITIALIZE = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "host", "version": "0"}}
AGREED = {"protocolVersion": VERSION, "capabilities": {"tools": {}}, "serverInfo": {"name": "emceepee"}}
NEW_FLEET = re.compile(r"serving through a new fleet, pid (\d+) \(session (\w+)\)")


# ---- what the host and the fleet write ------------------------------------------------------


def host_says(message: Any) -> bytes:
    """A line as a host writes it (json's spaces)."""
    return json.dumps(message).encode() + b"\n"


def fleet_says(message: Any) -> bytes:
    """A line as the fleet writes it (the SDK's compact form, non-ASCII as it is, but what UTF-8
    cannot hold: a lone surrogate, escaped)."""
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params or {}}


def answer(request_id: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def heard(book: Book, line: bytes) -> bool:
    """Whether the host gets this whole line of the fleet's."""
    return book.fleet_line(line, 0, len(line) - 1)


def flights(book: Book) -> dict[Any, str]:
    """The host's requests in flight, as sent → their methods."""
    return dict(book.in_flight.values())


def initialized_book() -> Book:
    book = Book()
    book.host_line(host_says(request(1, "initialize", INITIALIZE)))
    assert heard(book, fleet_says(answer(1, AGREED)))
    book.host_line(host_says(notification("notifications/initialized")))
    return book


# ---- the book --------------------------------------------------------------------------------


def test_the_handshake_is_replayed_under_private_ids_whose_answers_the_host_never_sees() -> None:
    book = initialized_book()
    for n, level in enumerate(("debug", "error"), start=2):
        book.host_line(host_says(request(n, "logging/setLevel", {"level": level})))
    for n, uri in enumerate(("file:///a", "file:///b", "file:///c"), start=4):
        book.host_line(host_says(request(n, "resources/subscribe", {"uri": uri})))
    book.host_line(host_says(request(7, "resources/unsubscribe", {"uri": "file:///b"})))
    for n in range(2, 8):
        assert heard(book, fleet_says(answer(n, {})))
    assert book.fleet_died() == []

    replay = book.replay()
    assert replay.opening is not None
    opening = json.loads(replay.opening)
    assert opening["id"].startswith(PRIVATE_PREFIX) and opening["params"] == INITIALIZE
    then = [json.loads(line) for line in replay.then]
    assert [(m["method"], m.get("params")) for m in then] == [
        ("notifications/initialized", None),
        ("logging/setLevel", {"level": "error"}),
        ("resources/subscribe", {"uri": "file:///a"}),
        ("resources/subscribe", {"uri": "file:///c"}),
    ]
    assert not heard(book, fleet_says(answer(opening["id"], AGREED)))
    assert book.replayed == Replayed(version=VERSION) and book.replayed.problem(book.protocol) is None
    for message in then[1:]:
        assert not heard(book, fleet_says(answer(message["id"], {})))
    assert heard(book, fleet_says(notification("notifications/tools/list_changed")))
    assert heard(book, fleet_says(answer(opening["id"], AGREED)))  # once: a host's own id, were it one


def test_only_an_initialize_the_fleet_accepted_is_replayed() -> None:
    book = Book()
    book.host_line(host_says(request("a", "initialize", {**INITIALIZE, "protocolVersion": "1999-01-01"})))
    assert heard(book, fleet_says({"jsonrpc": "2.0", "id": "a", "error": {"code": -32602, "message": "no"}}))
    assert book.replay().opening is None
    book.host_line(host_says(request("b", "initialize", INITIALIZE)))
    assert heard(book, fleet_says(answer("b", AGREED)))
    opening = book.replay().opening
    assert opening is not None and json.loads(opening)["params"] == INITIALIZE


@pytest.mark.parametrize(
    ("replayed", "problem"),
    [
        (Replayed(version=VERSION), None),
        (
            Replayed(version="2025-06-18"),
            f"the new fleet speaks MCP 2025-06-18, this host agreed on {VERSION}",
        ),
        (Replayed(error="Unsupported"), "the new fleet refused this host's initialize: Unsupported"),
    ],
)
def test_a_replayed_initialize_must_agree_what_the_first_did(replayed: Replayed, problem: str | None) -> None:
    assert replayed.problem(VERSION) == problem


def test_an_unreadable_answer_to_the_replayed_initialize_is_a_problem() -> None:
    book = initialized_book()
    book.fleet_died()
    opening = book.replay().opening
    assert opening is not None
    private = json.loads(opening)["id"]
    assert not heard(book, f'{{"jsonrpc":"2.0","id":"{private}","result":{{"nope":1}}}}\n'.encode())
    assert book.replayed is not None and book.replayed.problem(VERSION) is not None


# Every id MCP allows, and the JSON a fleet writes it in (escaped or not).
IDS: list[Any] = [0, -1, 2**70, "", "s", "é ☃", 'quo"te\\', "\\", "\ud800", "x" * 1000]


@pytest.mark.parametrize("escaped", [False, True])
def test_each_request_in_flight_gets_its_answer_from_the_front_when_the_fleet_dies(escaped: bool) -> None:
    book = initialized_book()
    for n, request_id in enumerate(IDS):
        book.host_line(host_says(request(request_id, "tools/call" if n % 2 else "resources/read")))
    for not_an_id in (1.5, True, None, {"a": 1}, [1]):  # the fleet answers these with id null
        book.host_line(host_says(request(not_an_id, "tools/call")))
    answered, cancelled = IDS[:3], IDS[3]
    for request_id in answered:
        line = json.dumps(answer(request_id, {}), separators=(",", ":"), ensure_ascii=escaped)
        assert heard(book, line.encode() + b"\n")
    book.host_line(host_says(notification("notifications/cancelled", {"requestId": cancelled})))
    answers = [json.loads(line) for line in book.fleet_died()]
    assert [a["id"] for a in answers] == IDS[4:]
    for n, got in enumerate(answers, start=4):
        if n % 2:
            assert got["result"] == {"content": [{"type": "text", "text": CALL_LOST}], "isError": True}
        else:
            assert got["error"]["code"] == INTERNAL_ERROR and "resources/read" in got["error"]["message"]
    assert book.fleet_died() == []


def test_hostile_host_lines_pass_as_they_are() -> None:
    book = initialized_book()
    deep = b"[" * 100_000 + b"]" * 100_000 + b"\n"
    huge = host_says(request("huge", "tools/call", {"name": "echo", "arguments": {"text": "y" * 5_000_000}}))
    lines = [b"garbage\n", b"\xff\xfe{\n", deep, b"[]\n", b"3\n", b'"s"\n', b"\n", huge]
    lines += [
        host_says({"jsonrpc": "2.0", "id": 9, "method": 7}),
        host_says(request(10, "ping") | {"params": 1}),
    ]
    for line in lines:
        assert book.host_line(line) is line
    assert flights(book) == {"huge": "tools/call", 10: "ping"}


def test_a_batch_is_noted_entry_by_entry_and_loses_only_answers_to_a_dead_fleet() -> None:
    book = initialized_book()
    batch = host_says([request(1, "tools/call"), request(2, "ping"), notification("notifications/x"), 7, "s"])
    assert book.host_line(batch) is batch
    assert flights(book) == {1: "tools/call", 2: "ping"}
    assert heard(book, fleet_says([answer(1, {}), answer(2, {})]))
    assert flights(book) == {}
    assert heard(book, fleet_says(request(5, "elicitation/create")))
    book.fleet_died()
    mixed = book.host_line(host_says([answer(5, {"action": "decline"}), answer(6, {})]))
    assert mixed is not None and json.loads(mixed) == [answer(6, {})]
    assert heard(book, fleet_says(request(8, "roots/list")))
    book.fleet_died()
    assert book.host_line(host_says([answer(8, {"roots": []})])) is None


def test_a_hosts_answer_to_a_dead_fleets_question_is_dropped_unless_a_new_fleet_asked_with_its_id() -> None:
    book = initialized_book()
    for question in (4, "q", 5):
        assert heard(book, fleet_says(request(question, "elicitation/create", {"message": "?"})))
    answered = host_says(answer(5, {"action": "accept"}))
    assert book.host_line(answered) is answered  # the live fleet's: it goes on
    book.fleet_died()
    assert book.host_line(host_says(answer(4, {"action": "accept"}))) is None
    again = host_says(answer(4, {"action": "accept"}))
    assert book.host_line(again) is again  # once: a second answer is the new fleet's to refuse
    assert heard(book, fleet_says(request("q", "roots/list")))  # the new fleet asks with the dead id
    late = host_says({"jsonrpc": "2.0", "id": "q", "error": {"code": -1, "message": "no roots"}})
    assert book.host_line(late) is late


def test_fleet_lines_not_in_the_sdks_shape_pass_without_a_note() -> None:
    book = initialized_book()
    book.host_line(host_says(request(1, "ping")))
    odd = [
        b'{"jsonrpc": "2.0", "id": 1, "result": {}}\n',  # not the SDK's bytes: not read
        b'{"jsonrpc":"2.0","id":"unterminated\n',
        b'{"jsonrpc":"2.0","id":1.5,"result":{}}\n',
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n',
        b'{"jsonrpc":"2.0","id":1}\n',
        b"[not json\n",
        b"#fleet control\n",
        b"\n",
        fleet_says(answer("z" * (ID_SCAN_BYTES + 1), {})),
    ]
    for line in odd:
        assert heard(book, line)
    assert flights(book) == {1: "ping"}


def test_ids_are_matched_as_the_sdk_matches_them() -> None:
    book = initialized_book()
    book.host_line(host_says(request("7", "tools/call")))
    book.host_line(host_says(request(" 8", "ping")))
    book.host_line(host_says(request("09", "ping")))
    assert heard(book, fleet_says(answer("7", {})))
    book.host_line(host_says(notification("notifications/cancelled", {"requestId": 8})))
    assert flights(book) == {"09": "ping"}
    assert [json.loads(line)["id"] for line in book.fleet_died()] == ["09"]  # as the host wrote it
    for question in (3, 4):
        assert heard(book, fleet_says(request(question, "sampling/createMessage")))
    answered = host_says(answer("3", {}))
    assert book.host_line(answered) is answered
    book.fleet_died()
    assert book.host_line(host_says(answer("4", {}))) is None
    assert book.host_line(answered) is answered  # 3 was answered before the fleet died


@pytest.mark.parametrize("request_id", IDS)
def test_an_id_is_read_from_a_fleet_lines_head(request_id: Any) -> None:
    line = fleet_says(answer(request_id, {"text": "…"}))
    found = head_id(line, len(b'{"jsonrpc":"2.0","id":'), len(line))
    assert found is not None and found[0] == request_id and line[found[1] :].startswith(b',"result":')


def test_an_initialize_in_flight_when_the_fleet_died_is_sent_again_as_the_host_wrote_it() -> None:
    book = Book()
    first = host_says(request(1, "initialize", INITIALIZE))
    book.host_line(first)
    assert book.fleet_died() == []
    replay = book.replay()
    assert replay.opening is None and replay.then == [first]
    assert heard(book, fleet_says(answer(1, AGREED)))  # the host's own answer
    assert book.initialize == first and book.protocol == VERSION


def test_a_host_of_the_2026_era_has_nothing_to_replay() -> None:
    book = Book()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    book.host_line(host_says(request(1, "tools/list", {"_meta": meta})))
    book.host_line(host_says(request(2, "logging/setLevel", {"level": "debug", "_meta": meta})))
    assert heard(book, fleet_says(answer(1, {"tools": []})))
    assert [json.loads(line)["id"] for line in book.fleet_died()] == [2]
    replay = book.replay()
    assert replay.opening is None and replay.then == []


# ---- the relay's lines ----------------------------------------------------------------------


def _written(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    seen = b""
    while chunk := os.read(fd, 1 << 20):
        seen += chunk
    return seen


@pytest.mark.parametrize("seed", range(5))
def test_the_fleets_lines_reach_the_host_whole_and_in_order_in_any_chunks(tmp_path: Path, seed: int) -> None:
    book = initialized_book()
    for n in range(2, 6):
        book.host_line(host_says(request(n, "tools/call")))
    book.fleet_died()
    opening = book.replay().opening
    assert opening is not None
    private = json.loads(opening)["id"]
    for n in range(2, 6):
        book.host_line(host_says(request(n, "tools/call")))
    lines = [
        fleet_says(notification("notifications/message", {"data": "x" * 3000})),
        fleet_says(answer(2, {"content": []})),
        fleet_says(answer(private, AGREED)),  # the front's: dropped
        fleet_says(answer(3, {"content": [{"type": "text", "text": "é" * 100_000}]})),
        fleet_says(request(0, "roots/list")),
        fleet_says(answer(4, {"content": [{"type": "text", "text": "big" * (HOLD_BYTES // 2)}]})),  # streams
        fleet_says(answer(5, {})),
    ]
    stream = b"".join(lines)
    shuffle = random.Random(seed)
    with (tmp_path / "stdout").open("w+b") as out:
        down = FleetLines(book, out.fileno())
        at = 0
        while at < len(stream):
            step = shuffle.choice([1, 2, 17, 4096, 70_000, 300_000])
            down.take(stream[at : at + step])
            at += step
        assert _written(out.fileno()) == stream.replace(lines[2], b"")
    assert flights(book) == {} and book.asked == {0} and book.replayed == Replayed(version=VERSION)


def test_the_fleets_partial_line_is_dropped_or_ended_when_it_dies(tmp_path: Path) -> None:
    book = initialized_book()
    book.host_line(host_says(request(2, "tools/call")))
    book.host_line(host_says(request(3, "tools/call")))
    small = fleet_says(answer(2, {"content": []}))
    big = fleet_says(answer(3, {"content": [{"type": "text", "text": "b" * (2 * HOLD_BYTES)}]}))
    with (tmp_path / "stdout").open("w+b") as out:
        down = FleetLines(book, out.fileno())
        down.take(small[:-5])
        down.cut()
        assert _written(out.fileno()) == b""
        down.take(big[: HOLD_BYTES + 10])
        down.cut()
        assert _written(out.fileno()) == big[: HOLD_BYTES + 10] + b"\n"  # the host's framing survives
        down.take(small)
        assert _written(out.fileno()) == big[: HOLD_BYTES + 10] + b"\n" + small
    assert flights(book) == {3: "tools/call"}  # half an answer answers nothing: the front will


def test_host_lines_past_the_limit_come_in_parts() -> None:
    lines = HostLines(10)
    assert list(lines.feed(b"abc\nde")) == [(b"abc\n", WHOLE)]
    assert list(lines.feed(b"fghijklmn")) == [(b"defghijklmn", FIRST)]
    assert list(lines.feed(b"no")) == [(b"no", MORE)]
    assert list(lines.feed(b"p\nqr\nst")) == [(b"p\n", MORE), (b"qr\n", WHOLE)]
    assert lines.buffer == b"st"


# ---- over real processes ---------------------------------------------------------------------


class WireHost(LineHost):
    """A LineHost that keeps every message the front wrote (these tests' are small)."""

    def __init__(self, process: anyio.abc.Process) -> None:
        super().__init__(process)
        self.heard: list[dict[str, Any]] = []

    def _deliver(self, line: bytes) -> None:
        self.heard.append(json.loads(line))
        super()._deliver(line)

    def initialize_responses(self) -> list[dict[str, Any]]:
        return [m for m in self.heard if "protocolVersion" in (m.get("result") or {})]


def _new_fleets(said: str) -> list[int]:
    return [int(found.group(1)) for found in NEW_FLEET.finditer(said)]


async def _held_call(host: Front, gate: Gate, into: dict[str, dict[str, Any]], key: str) -> None:
    args = {"server": "h", "tool": "gated", "args": gate.args(key), "timeout_ms": 600_000}
    into[key] = await host.host.tool("execute_tool", args)


@needs_proc
async def test_a_fleet_killed_with_calls_in_flight_on_two_hosts_leaves_both_serving(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    gates = {key: Gate(tmp_path / f"gate-{key}") for key in ("a", "b", "task")}
    results: dict[str, dict[str, Any]] = {}
    try:
        with anyio.fail_after(120):
            async with (
                front(config, tmp_path / "a.err", host=WireHost) as a,
                front(config, tmp_path / "b.err", host=WireHost) as b,
            ):
                fleet, _ = await a.reached()
                assert (await b.reached())[0] == fleet
                args = {"server": "h", "tool": "gated", "args": gates["task"].args(), "timeout_ms": 10}
                promoted = await a.host.tool("execute_tool", args)
                task_id = promoted["structuredContent"]["proxy_task"]["task_id"]
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_held_call, a, gates["a"], results, "a")
                    tg.start_soon(_held_call, b, gates["b"], results, "b")
                    for gate in gates.values():
                        await gate.held()
                    os.kill(fleet, signal.SIGKILL)
                for result in results.values():
                    assert result["isError"] and result["content"][0]["text"] == CALL_LOST
                assert await a.call("echo", text="again a") == "again a"  # no initialize sent again
                assert await b.call("echo", text="again b") == "again b"
                (new_fleet,) = set(_new_fleets(a.said) + _new_fleets(b.said))
                assert fleets_of(tmp_path / "emceepee-home") == [new_fleet] and not alive(fleet)
                tasks = (await b.host.tool("list_tasks", {}))["structuredContent"]["tasks"]
                (task,) = [t for t in tasks if t["task_id"] == task_id]
                assert task["status"] in ("interrupted", "working")
                shown = (await a.host.tool("get_task", {"task_id": task_id}))["structuredContent"]["task"]
                assert shown["status"] == "interrupted", shown
            await until(lambda: not alive(new_fleet))
    finally:
        for gate in gates.values():
            gate.open()
    for host in (a, b):
        wire = host.host
        assert isinstance(wire, WireHost)
        assert len(wire.initialize_responses()) == 1
        assert not [m for m in wire.heard if str(m.get("id")).startswith(PRIVATE_PREFIX)]
        assert "reaching a new one" in host.said and "serving through a new fleet" in host.said


class AskedHost(WireHost):
    """A host that can show forms, and leaves them for the test to answer."""

    async def initialize(self) -> None:
        await self.request("initialize", {**INITIALIZE, "capabilities": {"elicitation": {}}})
        await self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def questions(self) -> list[dict[str, Any]]:
        return [m for m in self.heard if m.get("method") == "elicitation/create"]


async def test_a_hosts_answer_to_the_dead_fleets_question_never_reaches_the_new_fleet(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "config.toml",
        '[fleet]\nidle_exit = "0"\n[defaults]\nelicitation = "forward"\n',
        example_table("elicit", "elicit.py"),
    )
    log = tmp_path / "emceepee-home" / "data" / "logs" / "fleet.log"
    results: dict[str, dict[str, Any]] = {}

    async def ask() -> None:
        call = {"server": "elicit", "tool": "ask", "args": {"question": "Name?"}, "timeout_ms": 600_000}
        results["ask"] = await host.tool("execute_tool", call)

    with anyio.fail_after(120):
        async with front(config, tmp_path / "a.err", host=AskedHost, serve_args=("--verbose",)) as a:
            host = a.host
            assert isinstance(host, AskedHost)
            fleet, _ = await a.reached()
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask)
                await until(lambda: bool(host.questions()))
                os.kill(fleet, signal.SIGKILL)
            assert results["ask"]["isError"]
            await until(lambda: bool(_new_fleets(a.said)))
            (question,) = host.questions()
            await host.write(answer(question["id"], {"action": "accept", "content": {"name": "late"}}))
            await host.write(answer(987654, {}))  # an answer nobody asked for: the new fleet logs it
            assert (await host.tool("list_servers", {}))["structuredContent"]["servers"][0][
                "name"
            ] == "elicit"
            await until(lambda: "unknown/late request id 987654" in log.read_text())
            said = log.read_text()
    assert f"unknown/late request id {question['id']!r}\n" not in said
    assert len(host.initialize_responses()) == 1


async def test_a_fleet_that_keeps_dying_ends_the_front_with_the_reason(tmp_path: Path) -> None:
    config = fleet_config(tmp_path / "config.toml")
    with anyio.fail_after(120):
        async with front(config, tmp_path / "a.err") as a:
            fleet, _ = await a.reached()
            for death in range(1, 3):
                os.kill(fleet, signal.SIGKILL)
                await until(lambda: len(_new_fleets(a.said)) == death)  # noqa: B023  # awaited here
                fleet = _new_fleets(a.said)[-1]
                assert await a.call("echo", text=f"after death {death}") == f"after death {death}"
            os.kill(fleet, signal.SIGKILL)
            assert await a.process.wait() == 1
    assert "the fleet closed this host's connection 3 times within 60 s" in a.said
    assert "giving up; its log: " in a.said


async def test_a_host_of_the_2026_era_goes_on_after_the_fleet_dies_with_nothing_replayed(
    tmp_path: Path,
) -> None:
    config = fleet_config(tmp_path / "config.toml")

    async def echo(host: LineHost, text: str) -> str:
        call = {"server": "h", "tool": "echo", "args": {"text": text}}
        params = {"name": "execute_tool", "arguments": call, "_meta": modern_meta({})}
        reply = json.loads(await host.request("tools/call", params))
        assert not reply["result"].get("isError"), reply
        return str(reply["result"]["content"][0]["text"])

    with anyio.fail_after(90):
        async with front(config, tmp_path / "a.err", initialized=False, host=WireHost) as a:
            assert await echo(a.host, "before") == "before"
            fleet, _ = await a.reached()
            os.kill(fleet, signal.SIGKILL)
            await until(lambda: bool(_new_fleets(a.said)))
            assert await echo(a.host, "after") == "after"
    wire = a.host
    assert isinstance(wire, WireHost) and wire.initialize_responses() == []
