"""The benchmark's backend: a minimal MCP server over stdio in the standard library only.

    python benchmarks/tiny_backend.py

It starts in tens of milliseconds and costs a few MB, so that a hundred of them fit on a small
machine and what the benchmark measures is the proxy in front, not the backend. It speaks the
handshake era: `initialize`, `ping`, `tools/list`, `tools/call`, and ignores notifications.

Tools
    echo(text)                -> the text back
    slow(seconds)             -> "done" after `seconds`; calls run concurrently (one timer each)
    blob(size)                -> one text block of `size` bytes ("x" repeated)
    progress(steps, seconds)  -> `steps` progress notifications (if asked for), then "done"
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"name": "slow", "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}}},
    {"name": "blob", "inputSchema": {"type": "object", "properties": {"size": {"type": "integer"}}}},
    {
        "name": "progress",
        "inputSchema": {
            "type": "object",
            "properties": {"steps": {"type": "integer"}, "seconds": {"type": "number"}},
        },
    },
]

out_lock = threading.Lock()


def send(message: dict[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    with out_lock:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def answer(request_id: Any, result: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}], "isError": False}


def call(request_id: Any, params: dict[str, Any]) -> None:
    name, args = params.get("name"), params.get("arguments") or {}
    token = (params.get("_meta") or {}).get("progressToken")
    if name == "echo":
        answer(request_id, text(str(args.get("text", ""))))
    elif name == "slow":
        threading.Timer(float(args.get("seconds", 0)), answer, (request_id, text("done"))).start()
    elif name == "blob":
        answer(request_id, text("x" * int(args.get("size", 0))))
    elif name == "progress":
        threading.Thread(target=progress, args=(request_id, token, args), daemon=True).start()
    else:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32602, "message": f"no tool {name}"}})


def progress(request_id: Any, token: Any, args: dict[str, Any]) -> None:
    steps, pause = int(args.get("steps", 3)), float(args.get("seconds", 0.01))
    for step in range(1, steps + 1):
        threading.Event().wait(pause)
        if token is not None:
            params = {"progressToken": token, "progress": step, "total": steps}
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
    answer(request_id, text("done"))


def main() -> None:
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None or method is None:
            continue  # a notification, or a response to something we never ask
        if method == "initialize":
            answer(
                request_id,
                {
                    "protocolVersion": message["params"].get("protocolVersion", "2025-11-25"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "tiny", "version": "1"},
                },
            )
        elif method == "tools/list":
            answer(request_id, {"tools": TOOLS})
        elif method == "tools/call":
            call(request_id, message.get("params") or {})
        elif method == "ping":
            answer(request_id, {})
        else:
            send(
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
            )


if __name__ == "__main__":
    main()
