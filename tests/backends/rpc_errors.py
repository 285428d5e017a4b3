"""An MCP backend whose prompts, resources and completions answer with the JSON-RPC errors a test
asks for: raw JSON-RPC over stdio, no SDK, so that any error object can be written.

    python tests/backends/rpc_errors.py [--scheme SCHEME] [--no-subscribe] [--events FILE]

It declares tools (none), prompts, resources (with subscribe, unless --no-subscribe) and completions.

Prompts
    fail(code, message, data?)   prompts/get answers error `code` with `message`, and `data` (JSON
                                 text) when given; completion/complete on its argument `code` answers
                                 error <the value typed> (an integer) with message "no completions"
    embedded()                   a message with an image and one with an embedded resource, each
                                 with its mimeType, and _meta on the result
Resources (SCHEME is "err" unless --scheme)
    SCHEME://listed              text "listed"
    SCHEME://fail/{code}         (template) resources/read answers error `code`, data {"uri": uri}
    SCHEME://odd/{kind}          (template) resources/read answers one of ODD: an error with a huge
                                 message, data of an odd type, or an error object that is not valid
                                 JSON-RPC
resources/subscribe and resources/unsubscribe answer {} and append "subscribed <uri>" or
"unsubscribed <uri>" to the --events file.

Everything diagnostic goes to stderr; stdout is the protocol wire.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

HUGE_MESSAGE = "x" * (1024 * 1024)
ODD: dict[str, dict[str, Any] | None] = {  # resources/read of SCHEME://odd/<kind>: the error object sent
    "huge_message": {"code": -32602, "message": HUGE_MESSAGE},
    "huge_data": {"code": -32002, "message": "big data", "data": {"blob": "y" * (2 * 1024 * 1024)}},
    "list_data": {"code": -32001, "message": "list data", "data": [1, "two", None, {"three": 3}]},
    "string_data": {"code": -32001, "message": "string data", "data": "just a string"},
    "number_data": {"code": -32001, "message": "number data", "data": 1.5},
    "server_in_data": {"code": -32001, "message": "its own server", "data": {"server": "theirs"}},
    "deep_data": {"code": -32001, "message": "deep data", "data": json.loads("[" * 60 + "]" * 60)},
    "big_code": {"code": 2**62, "message": "a big code"},
    "unicode": {"code": -32001, "message": "caf\u00e9 \u2603 \U0001f600\n second line\ttab"},
    "number_message": {"code": -32001, "message": 42},
    "float_code": {"code": 1.5, "message": "a fractional code"},
    "string_code": {"code": "-32602", "message": "a code in a string"},
    "no_message": {"code": -32001},
    "null_error": None,
}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(request_id: Any, value: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": value})


def error(request_id: Any, body: Any) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "error": body})


def capabilities(subscribe: bool) -> dict[str, Any]:
    return {"tools": {}, "prompts": {}, "resources": {"subscribe": subscribe}, "completions": {}}


def prompts() -> list[dict[str, Any]]:
    fail_args = [
        {"name": "code", "required": True},
        {"name": "message", "required": True},
        {"name": "data", "required": False},
    ]
    return [{"name": "fail", "arguments": fail_args}, {"name": "embedded", "description": "with media"}]


def embedded() -> dict[str, Any]:
    image = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
    resource = {"uri": "err://listed", "mimeType": "text/plain", "text": "listed"}
    return {
        "description": "with media",
        "_meta": {"example.com/k": "v"},
        "messages": [
            {"role": "user", "content": image},
            {"role": "assistant", "content": {"type": "resource", "resource": resource}},
        ],
    }


def get_prompt(request_id: Any, params: dict[str, Any]) -> None:
    args = params.get("arguments") or {}
    if params.get("name") == "embedded":
        result(request_id, embedded())
    elif params.get("name") == "fail":
        body: dict[str, Any] = {"code": int(args["code"]), "message": args["message"]}
        if "data" in args:
            body["data"] = json.loads(args["data"])
        error(request_id, body)
    else:
        error(request_id, {"code": -32602, "message": f"Unknown prompt: {params.get('name')}"})


def read_resource(request_id: Any, uri: str, scheme: str) -> None:
    if uri == f"{scheme}://listed":
        result(request_id, {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "listed"}]})
    elif uri.startswith(f"{scheme}://fail/"):
        code = int(uri.rsplit("/", 1)[1])
        error(request_id, {"code": code, "message": f"Resource not found: {uri}", "data": {"uri": uri}})
    elif uri.startswith(f"{scheme}://odd/"):
        error(request_id, ODD[uri.rsplit("/", 1)[1]])
    else:
        error(request_id, {"code": -32002, "message": f"Resource not found: {uri}"})


def complete(request_id: Any, params: dict[str, Any]) -> None:
    argument = params.get("argument") or {}
    value = str(argument.get("value", ""))
    if argument.get("name") == "code" and value.lstrip("-").isdigit():
        error(request_id, {"code": int(value), "message": "no completions", "data": {"value": value}})
    else:
        result(request_id, {"completion": {"values": [], "total": 0, "hasMore": False}})


def note(events: str | None, line: str) -> None:
    if events is not None:
        with open(events, "a") as f:
            f.write(line + "\n")


def handle(message: dict[str, Any], opts: argparse.Namespace) -> None:
    method, request_id = message.get("method"), message.get("id")
    params = message.get("params") or {}
    if request_id is None:
        return  # a notification
    scheme = opts.scheme
    if method == "initialize":
        info = {"name": "rpc-errors", "version": "0"}
        version = params.get("protocolVersion", "2025-11-25")
        caps = capabilities(not opts.no_subscribe)
        result(request_id, {"protocolVersion": version, "capabilities": caps, "serverInfo": info})
    elif method == "ping":
        result(request_id, {})
    elif method == "tools/list":
        result(request_id, {"tools": []})
    elif method == "prompts/list":
        result(request_id, {"prompts": prompts()})
    elif method == "prompts/get":
        get_prompt(request_id, params)
    elif method == "resources/list":
        result(request_id, {"resources": [{"uri": f"{scheme}://listed", "name": "listed"}]})
    elif method == "resources/templates/list":
        templates = [
            {"uriTemplate": f"{scheme}://fail/{{code}}", "name": "fail"},
            {"uriTemplate": f"{scheme}://odd/{{kind}}", "name": "odd"},
        ]
        result(request_id, {"resourceTemplates": templates})
    elif method == "resources/read":
        read_resource(request_id, str(params.get("uri")), scheme)
    elif method == "completion/complete":
        complete(request_id, params)
    elif method in ("resources/subscribe", "resources/unsubscribe"):
        note(opts.events, f"{method.split('/')[1]}d {params.get('uri')}")
        result(request_id, {})
    else:
        error(request_id, {"code": -32601, "message": f"Method not found: {method}"})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scheme", default="err")
    parser.add_argument("--no-subscribe", action="store_true")
    parser.add_argument("--events")
    opts = parser.parse_args()
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            handle(message, opts)


if __name__ == "__main__":
    main()
