"""Reading a huge ``tools/list`` answer only as far as the cap (``transport.listing``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpfleet.transport.listing import read_tool_listing


def answer(count: int, **result: Any) -> dict[str, Any]:
    tools = [
        {"name": f"t{index}", "inputSchema": {"type": "object", "properties": {}}} for index in range(count)
    ]
    return {"jsonrpc": "2.0", "id": 7, "result": {"tools": tools, **result}}


@pytest.mark.parametrize("indent", [None, 2], ids=["compact", "indented"])
def test_a_listing_keeps_its_first_tools_and_every_other_field(indent: int | None) -> None:
    full = answer(50, nextCursor="50", _meta={"k": [1, 2]})
    read = read_tool_listing(json.dumps(full, indent=indent).encode(), 10)
    assert read == {**full, "result": {**full["result"], "tools": full["result"]["tools"][:10]}}


def test_a_short_listing_is_read_whole() -> None:
    full = answer(3)
    assert read_tool_listing(json.dumps(full).encode(), 10) == full


@pytest.mark.parametrize(
    "line",
    [
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}),
        json.dumps({"jsonrpc": "2.0", "method": "x", "params": {"tools": []}}),
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": {"not": "an array"}}}),
        json.dumps(answer(3))[:-5],
        json.dumps(answer(3)) + " trailing",
        '{"jsonrpc": "2.0", "id": 1, "result": {"tools": [NaN]}}',
        "[1, 2]",
    ],
    ids=["no-tools", "a-request", "tools-not-an-array", "cut-short", "trailing-text", "nan", "not-an-object"],
)
def test_anything_else_is_left_to_the_ordinary_parse(line: str) -> None:
    assert read_tool_listing(line.encode(), 10) is None


def test_invalid_utf8_is_left_to_the_ordinary_parse() -> None:
    assert read_tool_listing(b'{"id": 1, "result": {"tools": ["\xff"]}}', 10) is None
