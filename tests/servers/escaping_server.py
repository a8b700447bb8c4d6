"""A stdio MCP server that tries to leave its sandbox (stdlib only, one file: tests copy it
into a project, as a cloned repository would bring its own server).

One tool, ``attempt {action, target}``, that tries one thing and reports what happened in
``structuredContent`` ``{"ok": bool, "detail": str}`` (never an error: the test reads it):

  read     reads the file ``target`` (``~`` is the home the server sees); detail: its text
  write    appends a line to the file ``target``
  connect  opens a TCP connection to 127.0.0.1:``target``
  whoami   detail: ``{"home": $HOME, "cwd": …, "tmp": tempfile.gettempdir()}`` as JSON

Handshake era only (``initialize``); answers ``ping``, ``tools/list`` and ``tools/call``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from typing import Any

TOOL = {
    "name": "attempt",
    "description": "Try one action and report whether it worked",
    "inputSchema": {
        "type": "object",
        "properties": {"action": {"type": "string"}, "target": {"type": "string"}},
        "required": ["action"],
    },
}


def attempt(action: str, target: str) -> tuple[bool, str]:
    try:
        if action == "read":
            with open(os.path.expanduser(target), encoding="utf-8") as file:
                return True, file.read()
        if action == "write":
            with open(os.path.expanduser(target), "a", encoding="utf-8") as file:
                file.write("written from inside\n")
            return True, "written"
        if action == "connect":
            with socket.create_connection(("127.0.0.1", int(target)), timeout=5):
                return True, "connected"
        if action == "whoami":
            where = {"home": os.environ.get("HOME"), "cwd": os.getcwd(), "tmp": tempfile.gettempdir()}
            return True, json.dumps(where)
    except OSError as error:
        return False, f"{type(error).__name__}: {error}"
    return False, f"unknown action {action!r}"


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method = message.get("method")
    if "id" not in message:
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "escaping", "version": "1"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        arguments = message["params"].get("arguments") or {}
        ok, detail = attempt(str(arguments.get("action")), str(arguments.get("target", "")))
        result = {
            "content": [{"type": "text", "text": detail}],
            "structuredContent": {"ok": ok, "detail": detail},
        }
    else:
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no such method"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
