"""An MCP server that says what trace context each call reached it with (stdlib only).

Usage: ``python trace_server.py [--http] [--name NAME]``. One tool, ``trace {}``, whose text
result is the JSON ``{"meta": {...}, "headers": {...}}``: the ``traceparent``, ``tracestate``
and ``baggage`` keys of the call's ``_meta``, and (over HTTP) the ``traceparent`` and
``tracestate`` headers of the POST that carried it.

Without ``--http`` it speaks line-delimited JSON-RPC on stdin/stdout, handshake era. With
``--http`` it serves streamable HTTP on 127.0.0.1 (a free port, printed as ``READY <port>``),
handshake era and answered as JSON: ``server/discover`` is an unknown method (so a client falls
back to ``initialize``), notifications get 202, and the GET stream and DELETE are 405, which a
client accepts.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TRACE_KEYS = ("traceparent", "tracestate", "baggage")
HEADER_KEYS = ("traceparent", "tracestate")
SESSION_ID = "trace-session"
TOOL = {
    "name": "trace",
    "description": "what trace context the call came with",
    "inputSchema": {"type": "object"},
}


def answer(message: dict[str, Any], name: str, headers: dict[str, str]) -> dict[str, Any] | None:
    """The answer to one JSON-RPC message (``None`` for a notification)."""
    if "id" not in message:
        return None
    method = message.get("method")
    params = message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": name, "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "ping":
        result = {}
    elif method == "tools/call" and params.get("name") == "trace":
        meta = params.get("_meta") or {}
        seen = {
            "meta": {key: meta[key] for key in TRACE_KEYS if key in meta},
            "headers": {key: headers[key] for key in HEADER_KEYS if key in headers},
        }
        result = {"content": [{"type": "text", "text": json.dumps(seen)}]}
    else:
        return {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": -32601, "message": "Method not found"},
        }
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def serve_stdio(name: str) -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line), name, {})
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


def serve_http(name: str) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {key.lower(): value for key, value in self.headers.items()}
            reply = answer(json.loads(body), name, headers)
            if reply is None:
                self.send_response(202)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("mcp-session-id", SESSION_ID)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._not_allowed()

        def do_DELETE(self) -> None:
            self._not_allowed()

        def _not_allowed(self) -> None:
            self.send_response(405)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--name", default="trace")
    parser.add_argument(
        "--transport", default="streamable-http", help="streamable HTTP only (fixtures pass it)"
    )
    options = parser.parse_args()
    if options.http:
        serve_http(options.name)
    else:
        serve_stdio(options.name)


if __name__ == "__main__":
    main()
