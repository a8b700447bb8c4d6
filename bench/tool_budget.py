"""The gateway's tool budget, measured: how well ``find_tools`` finds the tool a person means,
and how much smaller ``tools/list`` is when the gateway serves the search-and-call pair.

* **Retrieval**: each query of ``tests/servers/tool_search_queries.json`` (natural-language
  requests, each with the tool a person would expect) is searched over the tools of the MCP
  project's reference servers (filesystem, memory, git, time, everything; recorded in
  ``tests/servers/reference_tools.json``) under the names the gateway serves them by; recall@1
  and recall@5 are the share of queries whose expected tool comes first, or in the top 5.
* **Size**: a real ``mcpfleet serve`` with five copies of each reference server (250 tools)
  is asked ``tools/list`` over stdio in ``--tools all`` and ``--tools search``; the size is the
  bytes of the JSON-RPC response line, and tokens are estimated at 4 bytes each (the common
  rule of thumb for English and JSON under GPT and Claude tokenizers; no tokenizer is run).

``python -m bench.tool_budget --write`` puts the section at the end of BENCHMARKS.md (``make
bench`` keeps it there when it rewrites the rest of the report).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness import sections

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVERS = REPO_ROOT / "tests" / "servers"
REFERENCE_TOOLS = SERVERS / "reference_tools.json"
QUERIES = SERVERS / "tool_search_queries.json"
REFERENCE_SERVER = SERVERS / "reference_catalog_server.py"
HEADING = "## 10. Tool budget"
COPIES = 5
BYTES_PER_TOKEN = 4


@dataclass
class Recall:
    """How often the expected tool came first, or in the top five."""

    queries: int = 0
    at_1: float = 0.0
    at_5: float = 0.0
    find_bytes: int = 0
    """Mean size of a ``find_tools`` answer (its JSON, the default limit of 8) over the queries."""
    misses: list[str] = field(default_factory=list)
    """Each query whose expected tool was not first: the query, the expected and what came first."""


def reference_tools() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The reference servers' tools under their served names, and each served name's backend name."""
    from mcpfleet.gateway.naming import NamingPolicy, assign_served_names

    recorded: dict[str, list[dict[str, Any]]] = json.loads(REFERENCE_TOOLS.read_text(encoding="utf-8"))
    pairs = [(server, tool["name"]) for server, tools in recorded.items() for tool in tools]
    names = assign_served_names(pairs, NamingPolicy())
    served: list[dict[str, Any]] = []
    backend_names: dict[str, str] = {}
    for server, tools in recorded.items():
        for tool in tools:
            name = names.served(server, tool["name"])
            assert name is not None
            served.append({**tool, "name": name})
            backend_names[name] = tool["name"]
    return served, backend_names


def reference_index() -> Any:
    """The ``find_tools`` index over the reference servers' tools."""
    from mcpfleet.gateway.search import ToolIndex

    tools, backend_names = reference_tools()
    return ToolIndex(tools, backend_names)


def evaluate_retrieval(index: Any) -> Recall:
    """Recall@1 and recall@5 of the retrieval set over ``index``."""
    from mcpfleet.gateway.budget import DEFAULT_FIND_LIMIT, found_tool
    from mcpfleet.gateway.naming import NamingPolicy, assign_served_names

    queries: list[dict[str, str]] = json.loads(QUERIES.read_text(encoding="utf-8"))
    recorded: dict[str, list[dict[str, Any]]] = json.loads(REFERENCE_TOOLS.read_text(encoding="utf-8"))
    names = assign_served_names(
        [(server, tool["name"]) for server, tools in recorded.items() for tool in tools], NamingPolicy()
    )
    recall = Recall(queries=len(queries))
    first = top_five = 0
    answer_bytes: list[int] = []
    for entry in queries:
        expected = names.served(entry["server"], entry["tool"])
        found = [hit.name for hit in index.search(entry["query"], 5)]
        answer = [found_tool(hit.tool) for hit in index.search(entry["query"], DEFAULT_FIND_LIMIT)]
        answer_bytes.append(len(json.dumps({"tools": answer}, ensure_ascii=False).encode()))
        first += found[:1] == [expected]
        top_five += expected in found
        if found[:1] != [expected]:
            recall.misses.append(f"{entry['query']!r}: expected {expected}, first {found[:1] or 'nothing'}")
    recall.find_bytes = round(statistics.mean(answer_bytes))
    recall.at_1 = first / len(queries)
    recall.at_5 = top_five / len(queries)
    return recall


def listing_bytes(mode: str, workspace: Path) -> tuple[int, int]:
    """``(tools served, bytes of the tools/list response line)`` of a real gateway in ``mode``."""
    recorded: dict[str, list[dict[str, Any]]] = json.loads(REFERENCE_TOOLS.read_text(encoding="utf-8"))
    # Each copy gets its own environment: the fleet serves two entries that run the very same
    # command as one server under two names.
    servers = {
        f"{server}{copy or ''}": {
            "command": sys.executable,
            "args": [str(REFERENCE_SERVER), "--server", server],
            "env": {"REFERENCE_COPY": str(copy)},
        }
        for server in recorded
        for copy in range(COPIES)
    }
    config = workspace / "servers.json"
    config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    mcpfleet = Path(sys.executable).parent / "mcpfleet"
    command = [str(mcpfleet), "--config", str(config), "--startup-timeout", "0", "serve", "--tools", mode]
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=workspace
    ) as gateway:
        assert gateway.stdin is not None and gateway.stdout is not None
        gateway.stdin.write(b"".join(json.dumps(request).encode() + b"\n" for request in requests))
        gateway.stdin.flush()
        for line in gateway.stdout:
            message = json.loads(line)
            if message.get("id") == 2:
                gateway.stdin.close()
                gateway.wait(timeout=30)
                return len(message["result"]["tools"]), len(line.rstrip(b"\n"))
    raise RuntimeError(f"mcpfleet serve --tools {mode} ended without answering tools/list")


def render(recall: Recall, sizes: dict[str, tuple[int, int]]) -> str:
    total_tools = sizes["all"][0]
    all_bytes, search_bytes = sizes["all"][1], sizes["search"][1]
    lines = [
        HEADING,
        "",
        "`mcpfleet serve --tools search` (and `auto` above a client's budget) serves `find_tools` and",
        "`call_tool` instead of every tool. Measured by `python -m bench.tool_budget --write`.",
        "",
        f"**Retrieval** ({recall.queries} natural-language queries,",
        "`tests/servers/tool_search_queries.json`, over the 50 tools of the reference servers filesystem,",
        "memory, git, time and everything, under their served names; BM25 over names, titles,",
        "descriptions and schema properties):",
        "",
        "| recall@1 | recall@5 | goal recall@5 |",
        "|---|---|---|",
        f"| {recall.at_1:.2f} | {recall.at_5:.2f} | ≥ 0.90 ({'met' if recall.at_5 >= 0.9 else 'missed'}) |",
        "",
        f"**Size of `tools/list`** ({COPIES} copies of each reference server, {total_tools} tools;",
        f"bytes of the JSON-RPC response; tokens estimated at {BYTES_PER_TOKEN} bytes each):",
        "",
        "| mode | tools listed | bytes | ≈ tokens |",
        "|---|---|---|---|",
    ]
    for mode in ("all", "search"):
        count, size = sizes[mode]
        lines.append(f"| `--tools {mode}` | {count} | {size:,} | {size // BYTES_PER_TOKEN:,} |")
    lines += [
        "",
        f"The pair costs {search_bytes / all_bytes:.1%} of the full list. In exchange a model pays one",
        "`find_tools` round trip before it calls a tool it has not seen: over the retrieval queries an",
        f"answer (8 tools with their schemas) averages {recall.find_bytes:,} bytes"
        f" (≈ {recall.find_bytes // BYTES_PER_TOKEN:,} tokens).",
    ]
    if recall.misses:
        lines += ["", "Queries whose expected tool was not ranked first:", ""]
        lines += [f"- {miss}" for miss in recall.misses]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="put the section into BENCHMARKS.md")
    options = parser.parse_args()
    recall = evaluate_retrieval(reference_index())
    with tempfile.TemporaryDirectory(prefix="mcpfleet-bench-budget-") as workspace:
        # Nothing of the real user is read or written (its servers, profiles, the default cache).
        os.environ["MCPFLEET_HOME"] = str(Path(workspace) / "home")
        os.environ["HOME"] = workspace
        os.environ["XDG_CONFIG_HOME"] = str(Path(workspace) / ".config")
        sizes = {mode: listing_bytes(mode, Path(workspace)) for mode in ("all", "search")}
    section = render(recall, sizes)
    print(section)
    if options.write:
        sections.write_section(REPO_ROOT / "BENCHMARKS.md", HEADING, section)


if __name__ == "__main__":
    main()
