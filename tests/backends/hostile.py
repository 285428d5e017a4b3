"""A hostile MCP backend for fault-injection tests: raw JSON-RPC over stdio, no SDK.

    python tests/backends/hostile.py [--handshake ok|garbage|hang] [--exit-at-start CODE]
                                     [--ignore-eof] [--ignore-sigterm] [--setsid-child PIDFILE]
                                     [--say TEXT] [--say-env NAME] [--describe TEXT]
                                     [--start-when FILE] [--quick-orphan FILE]
                                     [--setsid-orphan FILE] [--fork-loop]

Start-up and signal behaviour comes from the flags:

    --handshake garbage   answer `initialize` with a line that is not JSON-RPC
    --handshake hang      never answer `initialize`
    --exit-at-start CODE  write a line to stderr and exit with CODE before reading anything
    --ignore-eof          keep running after stdin closes (until killed)
    --ignore-sigterm      ignore SIGTERM
    --setsid-child FILE   spawn a grandchild that calls setsid() (escaping the process group),
                          ignores SIGTERM and sleeps; its pid is written to FILE
    --quick-orphan FILE   double-fork a grandchild that exits at once: its parent exits first, so
                          serve adopts it (a zombie, unless reaped); its pid is written to FILE
                          (before --exit-at-start)
    --setsid-orphan FILE  double-fork a grandchild that calls setsid(), ignores SIGTERM and sleeps:
                          its parent exits at once, so serve adopts it with nothing linking it
                          to this backend; its pid is written to FILE (before --exit-at-start)
    --fork-loop           double-fork a grandchild that calls setsid(), ignores SIGTERM and forks
                          a child every 20 ms (each calls setsid() and sleeps, SIGTERM ignored
                          too), for ever: a process tree no single look can stop
    --say TEXT            write TEXT to stderr first thing (before --exit-at-start)
    --say-env NAME        write NAME=<its value> to stderr first thing (a backend echoing a secret)
    --describe TEXT       give every tool the description TEXT
    --start-when FILE     start (read stdin; or --exit-at-start) only once FILE exists: a slow start
                          the test ends when it chooses
    --tool NAME           also list a tool named NAME (repeatable; any characters, any length)
                          that answers "NAME called"
    --compact             write JSON without spaces, in the SDK's key order (jsonrpc, id, result)

Once initialized, its tools misbehave on request:

    echo(text)            the text back (the one well-behaved tool)
    pid()                 this process's pid, as text
    slow(seconds)         sleeps, then answers "done"
    hold(gate)            answers "released" once the file `gate` exists: a call in flight until
                          the test lets it end
    malformed()           a result whose `content` is a string, not a list
    flood(n, method?)     n notifications (default notifications/tools/list_changed), then "flooded"
    stderr_blob(mb)       mb MiB on stderr with no newline, then "blob written"
    oversize(mb)          one result line of about mb MiB (a text block of that size)
    big(mb, together, seed)  a text result of mb MiB (`big_text(mb, seed)`), written only once
                          `together` big calls are waiting (a gate the calls release), so that
                          many big answers reach serve at once
    oversize_late_id(mb)  the same, with its id written after the result (not in its first bytes)
    gated(file, text, kind)  writes `file`.held, waits until `file` exists (a gate the test
                          opens), then answers `text` (or, with `kind`, that one of SHAPES)
    stepped(file, steps)  for each step i: progress i of `steps` ("step i/steps"), then waits until
                          `file`.i exists; then answers "stepped": each step is the test's to open
    ticking(file)         progress 1, 2, 3… every 20 ms until `file` exists, then "ticked": progress
                          for a host that starts to listen at a moment it cannot know
    garbage()             a line of non-JSON on stdout, then a normal answer
    die(code)             exit at once with `code`, without answering
    pattern_arg(s)        `s` back; its schema's `pattern` backtracks catastrophically on "aaa…b"
    listings()            how many tools/list requests it has answered, as text
    stderr_lines(mb)      about mb MiB of short lines on stderr, then "lines written"
    environment()         the names of this process's environment variables, as a JSON list
    rpc_error(code, message)  a JSON-RPC error with that code and message, instead of a result
    suggest(kind)         "suggested" with a _meta.nextTool that is malformed (kind "string": a
                          string; "no_tool": an object without `tool`) or huge ("huge": echo with
                          a 1 MiB argument)
    endless()             "again", with a fresh nextResumeToken every time: it never ends
    request_id()          the JSON-RPC id of this call, as JSON text (which lane sent it)
    add_prompt(name, list_delay_s)  add a prompt, say notifications/prompts/list_changed, then answer
                          prompts/list only after list_delay_s: a backend slow to list
    typed(kind)           a tool with an output schema: "good", "bad" (fails it), "missing"
                          (no structuredContent) or "error" (isError, so not checked)
    lone_surrogate(where) a result holding an unpaired surrogate (`\\ud800`, valid JSON) in its text
                          block (where "text") or in its structuredContent (any other where)
    deep(levels)          a result whose structuredContent nests `levels` arrays deep
    shaped(kind)          a result of one shape: "meta" (structuredContent, _meta, isError),
                          "canonical" (the same, in the member order the SDK writes),
                          "error" (a JSON-RPC error with data), "extra" (an unknown member),
                          "image" (an image block), "chain" (a malformed _meta.nextTool),
                          "followed" (a _meta.nextTool to echo "followed")

Everything diagnostic goes to stderr; stdout is the protocol wire.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

TOOLS: dict[str, dict[str, Any]] = {
    "echo": {"text": {"type": "string"}},
    "pid": {},
    "slow": {"seconds": {"type": "number"}},
    "hold": {"gate": {"type": "string"}},
    "malformed": {},
    "flood": {"n": {"type": "integer"}, "method": {"type": "string"}},
    "stderr_blob": {"mb": {"type": "number"}},
    "oversize": {"mb": {"type": "number"}},
    "big": {"mb": {"type": "number"}, "together": {"type": "integer"}, "seed": {"type": "integer"}},
    "oversize_late_id": {"mb": {"type": "number"}},
    "gated": {"file": {"type": "string"}, "text": {"type": "string"}, "kind": {"type": "string"}},
    "stepped": {"file": {"type": "string"}, "steps": {"type": "integer"}},
    "ticking": {"file": {"type": "string"}},
    "garbage": {},
    "die": {"code": {"type": "integer"}},
    "pattern_arg": {"s": {"type": "string", "pattern": "^(a|aa)+$"}},
    "listings": {},
    "stderr_lines": {"mb": {"type": "number"}},
    "environment": {},
    "rpc_error": {"code": {"type": "integer"}, "message": {"type": "string"}},
    "suggest": {"kind": {"type": "string"}},
    "endless": {},
    "request_id": {},
    "shaped": {"kind": {"type": "string"}},
    "typed": {"kind": {"type": "string"}},
    "add_prompt": {"name": {"type": "string"}, "list_delay_s": {"type": "number"}},
    "lone_surrogate": {"where": {"type": "string"}},
    "deep": {"levels": {"type": "integer"}},
}
TYPED_OUTPUT = {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}
TYPED = {  # typed(kind): a result checked against TYPED_OUTPUT, the tool's output schema
    "good": {"content": [{"type": "text", "text": "1"}], "structuredContent": {"n": 1}, "isError": False},
    "bad": {"content": [{"type": "text", "text": "x"}], "structuredContent": {"n": "x"}, "isError": False},
    "missing": {"content": [{"type": "text", "text": "none"}], "isError": False},
    "error": {"content": [{"type": "text", "text": "failed"}], "isError": True},
}

SHAPES: dict[str, dict[str, Any]] = {
    "meta": {
        "content": [{"type": "text", "text": "with meta \u00e9"}],
        "structuredContent": {"n": 1.5, "list": [1, "two", None], "nested": {"a": True}},
        "isError": False,
        "_meta": {"example.com/k": "v"},
    },
    "canonical": {
        "_meta": {"example.com/k": "v"},
        "content": [{"text": "in the SDK's order é", "type": "text"}],
        "isError": False,
        "structuredContent": {"z": 1.0, "a": [True, None]},
    },
    "extra": {"content": [{"type": "text", "text": "extra"}], "isError": False, "unknownMember": 1},
    "image": {"content": [{"type": "image", "data": "aGk=", "mimeType": "image/png"}], "isError": False},
    "chain": {
        "content": [{"type": "text", "text": "next"}],
        "isError": False,
        "_meta": {"nextTool": {"name": "echo", "arguments": {"text": "x"}}},
    },
    "empty": {"content": [], "isError": False, "structuredContent": {"k": [1]}},
    "tricky": {  # what ends a plain result's content, in its _meta, its text and its structuredContent
        "_meta": {"content": [1], "isError": True, "s": '],"isError":'},
        "content": [{"type": "text", "text": 'a ],"isError": b'}, {"type": "text", "text": "]"}],
        "isError": False,
        "structuredContent": {"content": ['],"isError":'], "isError": [1]},
    },
    "followed": {
        "content": [{"type": "text", "text": "first"}],
        "isError": False,
        "_meta": {"nextTool": {"tool": "echo", "arguments": {"text": "followed"}}},
    },
}
endless_calls = 0

listings = 0
prompts: list[str] = []  # add_prompt's
prompts_delay_s = 0.0

out_lock = threading.Lock()
barriers: dict[int, threading.Barrier] = {}  # big(together=N)'s gates, one per N
BIG_GATE_S = 120.0  # a big call waits at most this long for the others


def big_text(mb: float, seed: int) -> str:
    """The text `big(mb, seed)` answers: mb MiB of ASCII that differs by seed and along its length
    (so a result cut, swapped or shifted on the way reads differently)."""
    size = int(mb * 1024 * 1024)
    block = "".join(f"{seed:04d}:{i:06d};" for i in range(1 << 12))  # 48 KiB, no two lines alike
    return (block * (size // len(block) + 1))[:size]


description: str | None = None  # --describe
extra_tools: list[str] = []  # --tool
separators: tuple[str, str] | None = None  # --compact


def send(message: dict[str, Any]) -> None:
    data = (json.dumps(message, separators=separators, ensure_ascii=separators is None) + "\n").encode()
    with out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def send_raw(data: bytes) -> None:
    with out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def result(request_id: Any, value: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def progress(token: Any, done: int, total: int | None = None, message: str | None = None) -> None:
    """notifications/progress for the call whose request carried `token` (none if it carried none)."""
    if token is None:
        return
    params: dict[str, Any] = {"progressToken": token, "progress": done}
    if total is not None:
        params["total"] = total
    if message is not None:
        params["message"] = message
    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})


def until_exists(path: str) -> None:
    """Hold the call until the test opens its gate (a file): the test's to decide, never a timer."""
    while not os.path.exists(path):
        time.sleep(0.02)


def call_tool(request_id: Any, name: str, args: dict[str, Any], token: Any = None) -> None:
    if name in extra_tools:
        result(request_id, text(f"{name} called"))
    elif name == "echo":
        result(request_id, text(str(args.get("text", ""))))
    elif name == "add_prompt":
        global prompts_delay_s
        prompts.append(str(args.get("name", "prompt")))
        prompts_delay_s = float(args.get("list_delay_s", 0))
        send({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"})
        result(request_id, text("added"))
    elif name == "pattern_arg":
        result(request_id, text(str(args.get("s", ""))))
    elif name == "pid":
        result(request_id, text(str(os.getpid())))
    elif name == "slow":
        time.sleep(float(args.get("seconds", 1)))
        result(request_id, text("done"))
    elif name == "hold":
        until_exists(str(args.get("gate")))
        result(request_id, text("released"))
    elif name == "malformed":
        result(request_id, {"content": "not a list"})
    elif name == "flood":
        method = args.get("method", "notifications/tools/list_changed")
        for _ in range(int(args.get("n", 1000))):
            send({"jsonrpc": "2.0", "method": method, "params": {}})
        result(request_id, text("flooded"))
    elif name == "stderr_blob":
        chunk = b"x" * (1024 * 1024)
        for _ in range(int(float(args.get("mb", 5)))):
            sys.stderr.buffer.write(chunk)
        sys.stderr.buffer.flush()
        result(request_id, text("blob written"))
    elif name == "oversize":
        size = int(float(args.get("mb", 65)) * 1024 * 1024)
        head = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": ""}]}}
        )
        cut = head.index('"text": "') + len('"text": "')
        send_raw(head[:cut].encode() + b"y" * size + head[cut:].encode() + b"\n")
    elif name == "big":
        together = int(args.get("together", 1))
        with out_lock:
            barrier = barriers.setdefault(together, threading.Barrier(together))
        barrier.wait(BIG_GATE_S)
        value = text(big_text(float(args.get("mb", 1)), int(args.get("seed", 0))))
        result(request_id, value)
    elif name == "oversize_late_id":
        size = int(float(args.get("mb", 65)) * 1024 * 1024)
        tail = json.dumps({"id": request_id})[1:]
        opening = b'{"jsonrpc": "2.0", "result": {"content": [{"type": "text", "text": "'
        send_raw(opening + b"y" * size + b'"}]}, ' + tail.encode() + b"\n")
    elif name == "gated":
        with open(f"{args.get('file')}.held", "w"):
            pass
        until_exists(str(args.get("file")))
        kind = args.get("kind")
        result(request_id, SHAPES[str(kind)] if kind else text(str(args.get("text", "opened"))))
    elif name == "stepped":
        steps = int(args.get("steps", 1))
        for step in range(1, steps + 1):
            progress(token, step, steps, f"step {step}/{steps}")
            until_exists(f"{args.get('file')}.{step}")
        result(request_id, text("stepped"))
    elif name == "ticking":
        ticks = 0
        while not os.path.exists(str(args.get("file"))):
            ticks += 1
            progress(token, ticks)
            time.sleep(0.02)
        result(request_id, text("ticked"))
    elif name == "garbage":
        send_raw(b"this is not json-rpc\n")
        result(request_id, text("after garbage"))
    elif name == "die":
        sys.stderr.write("hostile: dying on request\n")
        sys.stderr.flush()
        os._exit(int(args.get("code", 1)))
    elif name == "listings":
        result(request_id, text(str(listings)))
    elif name == "request_id":
        result(request_id, text(json.dumps(request_id)))
    elif name == "shaped" and args.get("kind") == "error":
        error = {"code": -32001, "message": "shaped failure", "data": {"why": "asked"}}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
    elif name == "shaped":
        result(request_id, SHAPES[str(args.get("kind"))])
    elif name == "typed":
        result(request_id, TYPED[str(args.get("kind"))])
    elif name == "stderr_lines":
        line = b"hostile: a line of stderr to fill the log " + b"z" * 60 + b"\n"
        for _ in range(int(float(args.get("mb", 1)) * 1024 * 1024) // len(line)):
            sys.stderr.buffer.write(line)
        sys.stderr.buffer.flush()
        result(request_id, text("lines written"))
    elif name == "rpc_error":
        error = {"code": int(args.get("code", -32603)), "message": str(args.get("message", ""))}
        send({"jsonrpc": "2.0", "id": request_id, "error": error})
    elif name == "environment":
        result(request_id, text(json.dumps(sorted(os.environ))))
    elif name == "suggest":
        suggestion: Any = {
            "string": "echo please",
            "no_tool": {"arguments": {"text": "x"}},
            "huge": {"tool": "echo", "arguments": {"text": "h" * (1024 * 1024)}},
        }[str(args.get("kind"))]
        result(request_id, {**text("suggested"), "_meta": {"nextTool": suggestion}})
    elif name == "lone_surrogate":
        broken = "half \ud800 a pair"  # json.dumps writes it as the escape a JavaScript host could
        where = str(args.get("where", "text"))
        result(
            request_id, text(broken) if where == "text" else {**text("x"), "structuredContent": {"s": broken}}
        )
    elif name == "deep":  # written by hand: json.dumps itself stops near 1000 levels
        levels = int(args.get("levels", 200))
        nested = "[" * levels + '"bottom"' + "]" * levels
        head = json.dumps({"jsonrpc": "2.0", "id": request_id})[:-1]
        body = '"result": {"content": [{"type": "text", "text": "deep"}], "structuredContent": {"deep": '
        send_raw(f"{head}, {body}{nested}}}}}}}\n".encode())
    elif name == "endless":
        global endless_calls
        endless_calls += 1
        result(request_id, {**text(f"again {endless_calls}"), "nextResumeToken": f"t{endless_calls}"})
    else:
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": -32602, "message": f"Unknown tool: {name}"},
            }
        )


def handle(message: dict[str, Any], handshake: str) -> None:
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        return  # a notification
    if method == "initialize":
        if handshake == "garbage":
            send_raw(b"garbage instead of an initialize result\n")
        elif handshake == "ok":
            version = message.get("params", {}).get("protocolVersion", "2025-11-25")
            result(
                request_id,
                {
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "hostile", "version": "0"},
                },
            )
        return  # hang: never answer
    if method == "ping":
        result(request_id, {})
    elif method == "tools/list":
        global listings
        listings += 1
        tools = [
            {"name": name, "inputSchema": {"type": "object", "properties": props}}
            for name, props in [*TOOLS.items(), *((name, {}) for name in extra_tools)]
        ]
        if description is not None:
            tools = [{**tool, "description": description} for tool in tools]
        for tool in tools:
            if tool["name"] == "typed":
                tool["outputSchema"] = TYPED_OUTPUT
        result(request_id, {"tools": tools})
    elif method == "prompts/list":
        listed = {"prompts": [{"name": name} for name in prompts]}
        timer = threading.Timer(prompts_delay_s, result, (request_id, listed))
        timer.daemon = True
        timer.start()
    elif method == "tools/call":
        params = message.get("params") or {}
        meta = params.get("_meta") or {}
        threading.Thread(
            target=call_tool,
            args=(request_id, params.get("name"), params.get("arguments") or {}, meta.get("progressToken")),
            daemon=True,
        ).start()
    else:
        send(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": -32601, "message": f"Method not found: {method}"},
            }
        )


def spawn_escaping_child(pidfile: str) -> None:
    code = (
        "import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "time.sleep(3600)"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    with open(pidfile, "w") as f:
        f.write(str(child.pid))


def orphan(pidfile: str, code: str) -> None:
    """A grandchild running `code`, whose parent (a middle process) exits as soon as it has
    written the grandchild's pid to `pidfile`; this process waits for that parent only."""
    middle = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', sys.argv[2]],"
        " stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)\n"
        "with open(sys.argv[1], 'w') as f:\n"
        "    f.write(str(child.pid))\n"
    )
    subprocess.run(
        [sys.executable, "-c", middle, pidfile, code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        check=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--handshake", choices=("ok", "garbage", "hang"), default="ok")
    parser.add_argument("--exit-at-start", type=int)
    parser.add_argument("--ignore-eof", action="store_true")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--setsid-child")
    parser.add_argument("--quick-orphan")
    parser.add_argument("--setsid-orphan")
    parser.add_argument("--fork-loop", action="store_true")
    parser.add_argument("--say")
    parser.add_argument("--say-env")
    parser.add_argument("--describe")
    parser.add_argument("--start-when")
    parser.add_argument("--tool", action="append", default=[])
    parser.add_argument("--compact", action="store_true")
    opts = parser.parse_args()
    extra_tools.extend(opts.tool)
    global description, separators
    description = opts.describe
    separators = (",", ":") if opts.compact else None
    if opts.say is not None:
        sys.stderr.write(f"hostile: {opts.say}\n")
    if opts.say_env is not None:
        sys.stderr.write(f"hostile: {opts.say_env}={os.environ.get(opts.say_env)}\n")
    sys.stderr.flush()
    while opts.start_when is not None and not os.path.exists(opts.start_when):
        time.sleep(0.05)
    if opts.quick_orphan:
        orphan(opts.quick_orphan, "")
    if opts.setsid_orphan:
        escaping = "import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        orphan(opts.setsid_orphan, escaping + "time.sleep(3600)")
    if opts.fork_loop:
        forking = (
            "import os, signal, time; os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "while True:\n"
            "    if os.fork() == 0:\n"
            "        os.setsid(); time.sleep(3600); os._exit(0)\n"
            "    time.sleep(0.02)\n"
        )
        orphan(os.devnull, forking)
    if opts.exit_at_start is not None:
        sys.stderr.write(f"hostile: exiting at start with code {opts.exit_at_start}\n")
        sys.stderr.flush()
        sys.exit(opts.exit_at_start)
    if opts.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if opts.setsid_child:
        spawn_escaping_child(opts.setsid_child)
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            handle(message, opts.handshake)
    if opts.ignore_eof:
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
