"""Newline-delimited JSON-RPC framing with bounded memory, and what can be read of a line too
long to hold.

Every wire of JSON lines uses it: a stdio server's stdout (``transport.stdio``), the
gateway's stdin (``gateway.stdio``), and both ends of the daemon's socket (the shim,
``daemon_client.shim``, and the daemon's control connections, ``daemon.control``). Standard
library only, in the contract room: the shim imports this, and it must start without the SDK.
"""

from __future__ import annotations

import json
import re
from typing import Any

OVERSIZED_KEPT_BYTES = 4096
"""Of a message over the limit, how many of its first and of its last bytes are kept to
find the id of the request it answered."""


class LineFramer:
    """Splits a byte stream into newline-terminated lines, in linear time and bounded memory.

    Each byte is searched for a newline once and copied at most once into the line being
    assembled (growing a ``bytes`` and re-splitting it at each chunk made a 50 MB message
    cost 28 s). A line longer than ``max_line_bytes`` is never held: from the moment it
    outgrows the limit only its size and its first and last ``OVERSIZED_KEPT_BYTES`` are
    kept, and it comes out as an ``OversizedLine``. Bytes after the last newline at the end
    of the stream are an incomplete message and never come out.
    """

    def __init__(self, max_line_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes
        self._partial = bytearray()
        self._oversized: OversizedLine | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for the line in progress (never more than ``max_line_bytes``)."""
        return len(self._partial)

    def feed(self, chunk: bytes) -> list[bytearray | OversizedLine]:
        """The lines that ``chunk`` completes, without their newline."""
        lines: list[bytearray | OversizedLine] = []
        view = memoryview(chunk)
        position = 0
        while position < len(chunk):
            newline = chunk.find(b"\n", position)
            end = len(chunk) if newline < 0 else newline
            self._take(view[position:end])
            if newline < 0:
                break
            lines.append(self._finish_line())
            position = newline + 1
        return lines

    def _take(self, piece: memoryview) -> None:
        if self._oversized is not None:
            self._oversized.add(piece)
        elif len(self._partial) + len(piece) > self.max_line_bytes:
            self._oversized = OversizedLine()
            self._oversized.add(memoryview(self._partial))
            self._oversized.add(piece)
            self._partial = bytearray()
        else:
            self._partial += piece

    def _finish_line(self) -> bytearray | OversizedLine:
        if self._oversized is not None:
            line, self._oversized = self._oversized, None
            return line
        # Handed over, not copied: the next line starts in a fresh buffer.
        completed, self._partial = self._partial, bytearray()
        return completed


class OversizedLine:
    """A line over the limit: its size and the two ends where a JSON-RPC id can sit."""

    def __init__(self) -> None:
        self.size = 0
        self.head = bytearray()
        self.tail = bytearray()

    def add(self, piece: memoryview) -> None:
        self.size += len(piece)
        if len(self.head) < OVERSIZED_KEPT_BYTES:
            self.head += piece[: OVERSIZED_KEPT_BYTES - len(self.head)]
        self.tail += piece[-OVERSIZED_KEPT_BYTES:]
        del self.tail[:-OVERSIZED_KEPT_BYTES]


_JSON_STRING = rb'"(?:[^"\\]|\\.)*"'
_JSON_SCALAR = rb"(?:" + _JSON_STRING + rb"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)"
_MEMBER_KEY = re.compile(rb"\s*(" + _JSON_STRING + rb")\s*:\s*")
_SCALAR = re.compile(_JSON_SCALAR)
_MEMBER_END = re.compile(rb"\s*([,}])")
_OBJECT_START = re.compile(rb"\s*\{")
_SCALAR_MEMBER = re.compile(rb"(" + _JSON_STRING + rb")\s*:\s*(" + _JSON_SCALAR + rb")")
# The run starts right after the large value (an object or an array): runs are then
# disjoint, and the search stays linear whatever the tail holds.
_TRAILING_MEMBERS = re.compile(
    rb"(?<=[\]}])\s*((?:,\s*" + _JSON_STRING + rb"\s*:\s*" + _JSON_SCALAR + rb"\s*)+)\}\s*$"
)


def _leading_members(head: bytes) -> tuple[dict[str, Any], str | None]:
    """The scalar top-level members at the start of a JSON object, and the key of the first
    member that is not a scalar (the large one), read from the object's first bytes."""
    members: dict[str, Any] = {}
    start = _OBJECT_START.match(head)
    if start is None:
        return members, None
    position = start.end()
    while True:
        key = _MEMBER_KEY.match(head, position)
        if key is None:
            return members, None
        name = json.loads(key.group(1))
        value = _SCALAR.match(head, key.end())
        end = _MEMBER_END.match(head, value.end()) if value is not None else None
        if value is None or end is None:
            return members, name
        members[name] = json.loads(value.group(0))
        if end.group(1) == b"}":
            return members, None
        position = end.end()


def _trailing_members(tail: bytes) -> dict[str, Any]:
    """The scalar top-level members that end a JSON object, read from its last bytes.

    Only members after the last non-scalar value match: the run must follow an object or an
    array and end the message with a single ``}``, so members of a nested object (closed by
    two or more) never do.
    """
    run = _TRAILING_MEMBERS.search(tail)
    if run is None:
        return {}
    return {
        json.loads(member.group(1)): json.loads(member.group(2))
        for member in _SCALAR_MEMBER.finditer(run.group(1))
    }


def edge_members(line: OversizedLine) -> tuple[dict[str, Any], str | None]:
    """The scalar top-level members at either end of a line over the limit (its ``id``,
    ``method``, ``jsonrpc`` when written around the large value), and the key of the first
    member that is not a scalar (``params``, ``result``), or None. Nothing for a line that
    does not start as a JSON object."""
    try:
        members, large_member = _leading_members(bytes(line.head))
        members.update(_trailing_members(bytes(line.tail)))
    except (ValueError, RecursionError):
        return {}, None
    return members, large_member


def oversized_response_id(line: OversizedLine) -> int | str | None:
    """The id of the response a line over the limit carried, if it is a response and its id
    is at either end of it (every JSON-RPC library writes ``jsonrpc`` and ``id`` before or
    after the large ``result``); ``None`` for a request, a notification or anything else."""
    members, large_member = edge_members(line)
    if "method" in members or large_member == "params":
        return None
    request_id = members.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id


def oversized_request_id(line: OversizedLine) -> int | str | None:
    """The id of the request a line over the limit carried, if its ``method`` and ``id`` are
    at either end of it (a client writes them around its large ``params``); ``None`` for a
    response, a notification or anything else."""
    members, _ = edge_members(line)
    request_id = members.get("id")
    if "method" not in members or isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id


def oversized_refusal(line: OversizedLine, max_line_bytes: int) -> str:
    """What a client is told of its message over the limit: the gateway's and the shim's words."""
    return f"message of {line.size} bytes is over the gateway's limit of {describe_size(max_line_bytes)}"


def describe_size(size: int) -> str:
    """``64 MiB``, ``512 KiB`` or ``1000 bytes``."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"
