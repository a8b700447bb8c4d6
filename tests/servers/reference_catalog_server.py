"""A stdio MCP server that lists the tools of one of the MCP project's reference servers.

``tests/servers/reference_tools.json`` holds the ``tools/list`` answers of the reference
servers (filesystem and memory 2026.8.31 from npm, git and time 2026.10.19 from PyPI,
everything 2026.8.31), recorded once by listing each real server: names, descriptions and
input schemas as their authors wrote them. This server lists one of them (``--server NAME``)
without their dependencies, and answers every call with ``called <tool> <arguments as JSON>``
(plus, for a tool with an output schema, the smallest structured content that schema
accepts), so tests of the gateway's tool budget search over real tools and can see which one
a call reached. Stdlib only, line-delimited JSON-RPC, handshake era.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REFERENCE_TOOLS = Path(__file__).with_name("reference_tools.json")


def reference_tools() -> dict[str, list[dict[str, Any]]]:
    """Every recorded reference server's tools, by server name."""
    tools: dict[str, list[dict[str, Any]]] = json.loads(REFERENCE_TOOLS.read_text(encoding="utf-8"))
    return tools


def smallest_instance(schema: Any) -> Any:
    """The smallest value ``schema`` accepts: required properties only, empty arrays, zeros."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {key: smallest_instance(properties.get(key, {})) for key in schema.get("required", [])}
    return {"array": [], "string": "", "number": 0, "integer": 0, "boolean": False}.get(str(kind))


def answer(message: dict[str, Any], tools: list[dict[str, Any]], server: str) -> dict[str, Any] | None:
    method = message.get("method")
    if "id" not in message:
        return None
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": server, "version": "recorded"},
        }
    elif method == "tools/list":
        result = {"tools": tools}
    elif method == "tools/call":
        params = message.get("params") or {}
        name = params.get("name")
        called = next((tool for tool in tools if tool["name"] == name), None)
        if called is None:
            return {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32602, "message": f"Unknown tool: {name}"},
            }
        arguments = json.dumps(params.get("arguments") or {}, sort_keys=True)
        result = {"content": [{"type": "text", "text": f"called {name} {arguments}"}]}
        if "outputSchema" in called:
            result["structuredContent"] = smallest_instance(called["outputSchema"])
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": f"no {method}"}}
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, choices=sorted(reference_tools()))
    args = parser.parse_args()
    tools = reference_tools()[args.server]
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line), tools, args.server)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
