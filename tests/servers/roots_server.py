"""A stdio MCP server that follows the client's roots as the reference filesystem server does
(stdlib only; line-delimited JSON-RPC, handshake era).

``--allow DIR`` (repeatable) are its configured folders. When the client declares the
``roots`` capability, the server asks ``roots/list`` once the handshake is done and then
allows the roots *instead of* its configured folders, as
``@modelcontextprotocol/server-filesystem`` does; a client that declares no roots, or answers
with none, leaves the configured folders in force (so does that server). Requests that
arrive while that question is open wait for its answer, so a verdict never depends on which
message came first.

Tools:
  read_text_file {path}  the file's text, or an isError result "Access denied - path outside
                         allowed directories: <path> not in <folders>"
  client_roots {}        JSON text {"declared": bool, "roots": [uri…] or null, "allowed": [dir…]}:
                         whether the client declared roots, what roots/list answered
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

ROOTS_REQUEST_ID = "roots-of-the-client"
TOOLS = [
    {
        "name": "read_text_file",
        "description": "Read a text file inside the allowed folders",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "client_roots",
        "description": "Whether the client declared roots, and what roots/list answered",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


class RootsServer:
    def __init__(self, allowed: list[Path]) -> None:
        self.allowed = [folder.resolve() for folder in allowed]
        self.declared = False
        self.roots: list[str] | None = None
        self.waiting_for_roots = False
        self.held: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def serve(self) -> None:
        for line in sys.stdin:
            if line.strip():
                self.receive(json.loads(line))

    def receive(self, message: dict[str, Any]) -> None:
        if message.get("id") == ROOTS_REQUEST_ID and "method" not in message:
            self.follow_roots(message)
            return
        if self.waiting_for_roots and "id" in message:
            self.held.append(message)
            return
        self.handle(message)

    def follow_roots(self, answer: dict[str, Any]) -> None:
        roots = (answer.get("result") or {}).get("roots")
        self.roots = [str(root.get("uri")) for root in roots] if isinstance(roots, list) else []
        # Like the reference server: the client's roots, when it names any, replace the
        # configured folders.
        if self.roots:
            self.allowed = [Path(unquote(urlparse(uri).path)).resolve() for uri in self.roots]
        self.waiting_for_roots = False
        held, self.held = self.held, []
        for message in held:
            self.handle(message)

    def handle(self, message: dict[str, Any]) -> None:
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            self.declared = isinstance((params.get("capabilities") or {}).get("roots"), dict)
            self.send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "roots-server", "version": "1.0"},
                    },
                }
            )
        elif method == "notifications/initialized":
            if self.declared:
                self.waiting_for_roots = True
                self.send({"jsonrpc": "2.0", "id": ROOTS_REQUEST_ID, "method": "roots/list", "params": {}})
        elif method == "tools/list":
            self.send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            self.send({"jsonrpc": "2.0", "id": request_id, "result": self.call(params)})
        elif method == "ping":
            self.send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        elif request_id is not None:
            self.send(
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}}
            )

    def call(self, params: dict[str, Any]) -> dict[str, Any]:
        arguments = params.get("arguments") or {}
        if params.get("name") == "client_roots":
            seen = {"declared": self.declared, "roots": self.roots, "allowed": [str(p) for p in self.allowed]}
            return {"content": [{"type": "text", "text": json.dumps(seen)}]}
        path = Path(str(arguments.get("path", ""))).resolve()
        if not any(path == folder or folder in path.parents for folder in self.allowed):
            folders = ", ".join(str(folder) for folder in self.allowed)
            text = f"Access denied - path outside allowed directories: {path} not in {folders}"
            return {"content": [{"type": "text", "text": text}], "isError": True}
        return {"content": [{"type": "text", "text": path.read_text()}]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--allow", action="append", default=[], type=Path)
    RootsServer(parser.parse_args().allow).serve()


if __name__ == "__main__":
    main()
