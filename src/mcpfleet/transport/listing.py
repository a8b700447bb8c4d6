"""A huge ``tools/list`` answer read without building the tools past the server's cap.

Parsing a line builds every value in it: a 17 MB answer of 100 000 tools costs about 570 MB
of Python objects, even though only the first ``maxTools`` (2 000) are ever used. So a line
over ``LARGE_LINE_BYTES`` that holds a JSON-RPC response whose ``result`` has a ``tools``
array is read member by member (the standard library's ``raw_decode``): the ``tools`` entries
past the ones kept are decoded one at a time and dropped at once, so memory stays that of the
kept ones. Anything else about the line (not a response, no ``tools``, a syntax error) makes
``read_tool_listing`` return ``None`` and the line is parsed as every other one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from mcpfleet.errors import MCPFleetError

LARGE_LINE_BYTES = 1024 * 1024
"""Lines above this size are tried as a tool listing first; smaller ones are cheap to parse whole."""

_WHITESPACE = re.compile(r"[ \t\n\r]*")


class _NotAListing(MCPFleetError):
    pass


def read_tool_listing(line: bytes | bytearray, keep: int) -> dict[str, Any] | None:
    """The JSON-RPC response in ``line`` with at most ``keep`` entries in ``result.tools``,
    or ``None`` when ``line`` is not a response carrying a tools array (or is not JSON)."""
    try:
        text = bytes(line).decode("utf-8")
    except UnicodeDecodeError:
        return None
    decoder = json.JSONDecoder(parse_constant=_refuse_constant)
    listed = [False]

    def tools_array(position: int) -> tuple[list[Any], int]:
        listed[0] = True
        return _array_prefix(text, position, decoder, keep)

    def result_object(position: int) -> tuple[dict[str, Any], int]:
        return _object(text, position, decoder, {"tools": tools_array})

    try:
        message, end = _object(text, _skip(text, 0), decoder, {"result": result_object})
    except (_NotAListing, ValueError, RecursionError, IndexError):
        return None
    if _skip(text, end) != len(text) or not listed[0] or "id" not in message:
        return None
    return message


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _skip(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    return match.end() if match is not None else position


def _object(
    text: str,
    position: int,
    decoder: json.JSONDecoder,
    special: dict[str, Callable[[int], tuple[Any, int]]],
) -> tuple[dict[str, Any], int]:
    """A JSON object starting at ``position``; the values of ``special`` keys are read by their
    own reader (only at this level)."""
    if text[position] != "{":
        raise _NotAListing
    members: dict[str, Any] = {}
    position = _skip(text, position + 1)
    if text[position] == "}":
        return members, position + 1
    while True:
        key, position = decoder.raw_decode(text, position)
        if not isinstance(key, str):
            raise _NotAListing
        position = _skip(text, position)
        if text[position] != ":":
            raise _NotAListing
        position = _skip(text, position + 1)
        reader = special.get(key)
        if reader is not None and text[position] in "{[":
            members[key], position = reader(position)
        else:
            members[key], position = decoder.raw_decode(text, position)
        position = _skip(text, position)
        if text[position] == "}":
            return members, position + 1
        if text[position] != ",":
            raise _NotAListing
        position = _skip(text, position + 1)


def _array_prefix(text: str, position: int, decoder: json.JSONDecoder, keep: int) -> tuple[list[Any], int]:
    """The first ``keep`` items of the JSON array at ``position``; the rest are decoded one by one
    (the line must still be valid JSON) and dropped."""
    if text[position] != "[":
        raise _NotAListing
    items: list[Any] = []
    position = _skip(text, position + 1)
    if text[position] == "]":
        return items, position + 1
    while True:
        item, position = decoder.raw_decode(text, position)
        if len(items) < keep:
            items.append(item)
        position = _skip(text, position)
        if text[position] == "]":
            return items, position + 1
        if text[position] != ",":
            raise _NotAListing
        position = _skip(text, position + 1)


__all__ = ["LARGE_LINE_BYTES", "read_tool_listing"]
