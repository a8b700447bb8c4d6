"""The gateway's event store: what a client that lost its stream gets back, and what is forgotten."""

from __future__ import annotations

import mcp_types
import pytest
from mcp.server.streamable_http import EventMessage

from mcpfleet.gateway.resumption import BoundedEventStore

pytestmark = pytest.mark.anyio


def _notification(text: str) -> mcp_types.JSONRPCMessage:
    return mcp_types.JSONRPCNotification(
        jsonrpc="2.0", method="notifications/message", params={"level": "info", "data": text}
    )


async def _replayed(store: BoundedEventStore, last_event_id: str) -> tuple[str | None, list[str]]:
    sent: list[EventMessage] = []

    async def collect(event: EventMessage) -> None:
        sent.append(event)

    stream = await store.replay_events_after(last_event_id, collect)
    return stream, [_data(event.message) for event in sent]


def _data(message: mcp_types.JSONRPCMessage) -> str:
    assert isinstance(message, mcp_types.JSONRPCNotification) and message.params is not None
    data = message.params["data"]
    assert isinstance(data, str)
    return data


async def test_a_stream_resumes_after_the_last_event_its_client_saw_and_only_that_stream() -> None:
    store = BoundedEventStore()
    priming = await store.store_event("call-1", None)
    await store.store_event("call-1", _notification("first"))
    await store.store_event("call-2", _notification("another call's"))
    await store.store_event("call-1", _notification("second"))
    assert await _replayed(store, priming) == ("call-1", ["first", "second"])


async def test_the_oldest_events_go_first_beyond_the_bounds_and_cannot_be_resumed_from() -> None:
    store = BoundedEventStore(max_events=3)
    ids = [await store.store_event("call", _notification(str(index))) for index in range(5)]
    assert store.kept == 3
    assert await _replayed(store, ids[0]) == (None, [])
    assert await _replayed(store, ids[2]) == ("call", ["3", "4"])

    small = BoundedEventStore(max_bytes=200)
    kept = [await small.store_event("call", _notification("x" * 60)) for _ in range(4)]
    assert small.kept < 4
    assert await _replayed(small, kept[0]) == (None, [])


def test_an_empty_store_counts_as_a_store() -> None:
    # The SDK checks ``if event_store:``; an empty store that were falsy would turn resumption off.
    assert BoundedEventStore()


async def test_an_id_from_another_run_of_the_gateway_replays_nothing() -> None:
    earlier, later = BoundedEventStore(), BoundedEventStore()
    first = await earlier.store_event("call", _notification("old"))
    await later.store_event("call", _notification("new"))
    assert await _replayed(later, first) == (None, [])
