"""The synthetic stdio MCP server every peer is benchmarked against (stdlib only).

It answers in a single thread with no work per request, so what a benchmark measures is
the client. Handshake era (``initialize``); unknown requests, ``server/discover``
included, get -32601 at once, so clients that probe for the modern era pay no timeout.

Flags:
  --name NAME          serverInfo name (unique per server, so aggregated tool names differ)
  --tools N            how many tools ``tool_0`` … (default 5); each echoes ``message``
  --init-delay S       sleep S seconds before reading stdin: a slow cold start
  --held-while FILE    read nothing from stdin while FILE exists: the harness holds the server
                       down for a whole run, whatever the machine's load, with the command line
                       (the tool cache's key) of the run that filled the cache
  --ignore-sigterm     only SIGKILL ends it
  --ignore-stdin-eof   keep running after stdin closes
  --pid-dir DIR        write a file named after the pid, so the harness can find orphans; it holds
                       ``up`` once the init delay is over, so the harness can tell whether a client
                       handed out tools before the server could have answered
  --drop-unknown       never answer unknown requests (``server/discover`` included), as some
                       legacy servers do: a client probing for the modern era waits its bound
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any


def tool_list(count: int) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}
    return [
        {"name": f"tool_{index}", "description": f"Echo a message ({index})", "inputSchema": schema}
        for index in range(count)
    ]


def answer(message: dict[str, Any], options: argparse.Namespace, tools: list[dict[str, Any]]) -> Any:
    """The reply to one request, or ``None`` for a notification."""
    method = message.get("method")
    request_id = message.get("id")
    if request_id is None or method is None:
        return None
    params = message.get("params") or {}
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": options.name, "version": "1.0.0"},
        }
    elif method == "tools/list":
        result = {"tools": tools}
    elif method == "tools/call":
        text = str((params.get("arguments") or {}).get("message", ""))
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    elif options.drop_unknown:
        return None
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="synthetic")
    parser.add_argument("--tools", type=int, default=5)
    parser.add_argument("--init-delay", type=float, default=0.0)
    parser.add_argument("--held-while")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--ignore-stdin-eof", action="store_true")
    parser.add_argument("--pid-dir")
    parser.add_argument("--drop-unknown", action="store_true")
    options = parser.parse_args()
    if options.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pid_file = os.path.join(options.pid_dir, str(os.getpid())) if options.pid_dir else None
    if pid_file:
        with open(pid_file, "w"):
            pass
    if options.init_delay > 0:
        time.sleep(options.init_delay)
    while options.held_while and os.path.exists(options.held_while):
        time.sleep(0.05)
    if pid_file:
        with open(pid_file, "w") as marker:
            marker.write("up")
    tools = tool_list(options.tools)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        for item in message if isinstance(message, list) else [message]:
            reply = answer(item, options, tools) if isinstance(item, dict) else None
            if reply is not None:
                stdout.write(json.dumps(reply).encode() + b"\n")
                stdout.flush()
    while options.ignore_stdin_eof:
        time.sleep(3600)


if __name__ == "__main__":
    main()
