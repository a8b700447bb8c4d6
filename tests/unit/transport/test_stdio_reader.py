"""The stdio reader on whatever a server writes: partial lines, invalid UTF-8, non-JSON,
huge lines. It never raises, never holds more than the message limit, delivers every
message within the limit in order, and answers a request whose answer was too large.

The reader is driven synchronously, chunk by chunk, exactly as the transport feeds it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.contract.framing import OVERSIZED_KEPT_BYTES, LineFramer, OversizedLine, oversized_response_id
from mcpfleet.transport.stdio import MESSAGE_TOO_LARGE, MessageReader

LIMIT = 512


def chunked(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    """``data`` split at the given offsets (sorted, deduplicated, clipped to its length)."""
    start = 0
    for cut in sorted({cut % (len(data) + 1) for cut in cuts}):
        yield data[start:cut]
        start = cut
    yield data[start:]


def oversized(data: bytes) -> OversizedLine:
    line = OversizedLine()
    line.add(memoryview(data))
    return line


def dumped(message: Any) -> dict[str, Any]:
    result: dict[str, Any] = message.message.model_dump(by_alias=True, mode="json", exclude_none=True)
    return result


# -- the framer ------------------------------------------------------------------------------

no_newline = st.binary(max_size=8).map(lambda raw: raw.replace(b"\n", b" "))
# A pattern repeated up to 3000 times: lines from empty to well past the limit and past
# the kept head and tail, cheaply.
lines = st.tuples(no_newline, st.integers(0, 3000)).map(lambda spec: spec[0] * spec[1])


@given(
    body=st.lists(lines, max_size=8),
    trailing=no_newline,
    limit=st.integers(1, 2 * LIMIT),
    cuts=st.lists(st.integers(0, 1 << 20), max_size=12),
)
def test_the_framer_splits_any_stream_as_a_reference_split_would(
    body: list[bytes], trailing: bytes, limit: int, cuts: list[int]
) -> None:
    stream = b"".join(line + b"\n" for line in body) + trailing
    framer = LineFramer(limit)
    produced: list[bytearray | OversizedLine] = []
    for chunk in chunked(stream, cuts):
        produced.extend(framer.feed(chunk))
        assert framer.buffered_bytes <= limit
    assert len(produced) == len(body)
    for expected, line in zip(body, produced, strict=True):
        if len(expected) <= limit:
            assert isinstance(line, bytearray)
            assert line == expected
        else:
            assert isinstance(line, OversizedLine)
            assert line.size == len(expected)
            assert line.head == expected[:OVERSIZED_KEPT_BYTES]
            assert line.tail == expected[-OVERSIZED_KEPT_BYTES:]


# -- the reader ------------------------------------------------------------------------------

request_ids = st.one_of(st.integers(0, 10**6), st.text("abc123", min_size=1, max_size=6))


@st.composite
def pieces(draw: st.DrawFn) -> tuple[bytes, dict[str, Any] | None]:
    """One line of a server's stdout and the message the reader must deliver for it."""
    kind = draw(st.sampled_from(["response", "notification", "huge", "garbage", "text", "partial", "blank"]))
    request_id = draw(request_ids)
    text = draw(st.text(max_size=20))  # even as JSON escapes, far below the limit
    response = {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}}
    if kind == "response":
        return json.dumps(response).encode(), response
    if kind == "notification":
        # One the reader never folds (server logs are bounded per second: see test_notification_folding).
        notification = {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": text},
        }
        return json.dumps(notification).encode(), notification
    if kind == "huge":
        big = {"content": [{"type": "text", "text": "y" * draw(st.integers(LIMIT, 4 * LIMIT))}]}
        id_last = draw(st.booleans())
        message = (
            {"result": big, "jsonrpc": "2.0", "id": request_id} if id_last else {**response, "result": big}
        )
        expected = {"jsonrpc": "2.0", "id": request_id, "error": {"code": MESSAGE_TOO_LARGE}}
        return json.dumps(message).encode(), expected
    if kind == "garbage":
        # A byte that never starts valid UTF-8, then anything: never JSON.
        return b"\xff" + draw(no_newline), None
    if kind == "text":
        return b"Starting server... " + text.encode(), None
    if kind == "partial":
        encoded = json.dumps(response).encode()
        return encoded[: draw(st.integers(1, len(encoded) - 1))], None
    return b" \t\r", None


@given(stream_pieces=st.lists(pieces(), max_size=12), cuts=st.lists(st.integers(0, 1 << 16), max_size=16))
def test_the_reader_never_raises_never_holds_past_the_limit_and_delivers_in_order(
    stream_pieces: list[tuple[bytes, dict[str, Any] | None]], cuts: list[int]
) -> None:
    stream = b"".join(line + b"\n" for line, _ in stream_pieces)
    reader = MessageReader("fuzzed", LIMIT)
    delivered: list[dict[str, Any]] = []
    for chunk in chunked(stream, cuts):
        delivered.extend(dumped(message) for message in reader.feed(chunk))
        assert reader.framer.buffered_bytes <= LIMIT
    expected = [message for _, message in stream_pieces if message is not None]
    assert len(delivered) == len(expected)
    for got, want in zip(delivered, expected, strict=True):
        if "error" in want:
            assert got["id"] == want["id"] and got["error"]["code"] == MESSAGE_TOO_LARGE
            assert 'MCP server "fuzzed"' in got["error"]["message"]
            assert "over its limit of 512 bytes" in got["error"]["message"]
        else:
            assert got == want


@given(head=st.binary(max_size=300), tail=st.binary(max_size=300))
def test_finding_the_id_of_an_oversized_line_never_raises(head: bytes, tail: bytes) -> None:
    line = OversizedLine()
    line.head += head
    line.tail += tail
    found = oversized_response_id(line)
    assert found is None or isinstance(found, int | str)


def id_of(message: dict[str, Any]) -> int | str | None:
    return oversized_response_id(oversized(json.dumps(message).encode()))


def test_the_id_is_found_only_at_the_top_level_of_a_response() -> None:
    result = {"content": [{"type": "text", "id": 99, "text": "z" * 10_000}]}
    assert id_of({"jsonrpc": "2.0", "id": 7, "result": result}) == 7
    assert id_of({"result": result, "jsonrpc": "2.0", "id": "r-8"}) == "r-8"
    assert id_of({"jsonrpc": "2.0", "error": {"code": 1, "message": "e" * 10_000}, "id": 4}) == 4
    # Only a nested id at either end: not the response's own.
    nested_last = {"content": [{"type": "text", "text": "z" * 10_000, "id": 5}]}
    assert id_of({"jsonrpc": "2.0", "result": nested_last}) is None
    # Requests and notifications from the server are waited for by nobody here.
    assert id_of({"jsonrpc": "2.0", "id": 3, "method": "sampling/createMessage", "params": result}) is None
    assert id_of({"params": result, "jsonrpc": "2.0", "id": 3, "method": "roots/list"}) is None
    assert oversized_response_id(oversized(b"[" + b"1," * 5000 + b"1]")) is None


def test_a_huge_stream_is_read_in_bounded_memory() -> None:
    reader = MessageReader("flood", LIMIT)
    chunk = b"q" * 65536
    for _ in range(200):  # 13 MB without a newline
        assert reader.feed(chunk) == []
        assert reader.framer.buffered_bytes <= LIMIT
    assert reader.feed(b"\n") == []
    assert reader.oversized_messages == 1
