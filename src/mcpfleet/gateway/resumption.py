"""Resumable HTTP streams for the gateway: a small, bounded, in-memory ``EventStore``.

With an event store, the SDK's streamable HTTP transport opens each SSE stream with a
*priming* event (an id and empty data, and the ``retry`` the client should wait before
reconnecting) and numbers every event it sends. A client whose stream broke mid-call (a
proxy's idle timeout, a laptop waking up) reconnects with ``Last-Event-ID`` and gets what it
missed (SEP-1699). Without one, a broken stream loses the call's answer.

The gateway keeps only the recent past: at most ``MAX_EVENTS`` events and ``MAX_BYTES`` of
messages, oldest dropped first, so a busy gateway's memory stays bounded. A client asking to
resume from an event that was dropped (or from another run of the gateway: ids carry a
random prefix per store) gets nothing replayed, as if the stream were unknown.

Imported only by ``gateway.http`` when it serves (it subclasses the SDK's interface).
"""

from __future__ import annotations

import itertools
import secrets
from abc import abstractmethod
from collections import OrderedDict
from dataclasses import dataclass

from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types import JSONRPCMessage

MAX_EVENTS = 1024
"""Events kept for resumption, over every stream together."""
MAX_BYTES = 8 * 1024 * 1024
"""Serialized size of the kept messages, over every stream together."""
RETRY_INTERVAL_MS = 1000
"""How long a client waits before reconnecting a stream the gateway closed (SSE ``retry``)."""


@dataclass(frozen=True)
class _Event:
    stream_id: StreamId
    message: JSONRPCMessage | None
    size: int


class StreamEventStore(EventStore):
    """An ``EventStore`` that can tell a request's stream from a session's own (GET) stream by an
    event's id: what a drain asks of the event a client resumes from (``gateway.draining``)."""

    @abstractmethod
    def resumes_a_request(self, event_id: EventId) -> bool:
        """Whether ``event_id`` is an event kept here of a request's stream."""


class BoundedEventStore(StreamEventStore):
    """The last ``max_events`` events (and at most ``max_bytes`` of them) of every stream."""

    def __init__(self, *, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._run = secrets.token_hex(4)
        self._counter = itertools.count(1)
        self._events: OrderedDict[EventId, _Event] = OrderedDict()
        self._bytes = 0

    @property
    def kept(self) -> int:
        """How many events are kept now. (Not ``__len__``: the SDK tests the store for truth,
        and an empty store must still count as one.)"""
        return len(self._events)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = f"{self._run}-{next(self._counter)}"
        size = len(message.model_dump_json(by_alias=True, exclude_none=True)) if message is not None else 0
        self._events[event_id] = _Event(stream_id, message, size)
        self._bytes += size
        while self._events and (len(self._events) > self.max_events or self._bytes > self.max_bytes):
            _, dropped = self._events.popitem(last=False)
            self._bytes -= dropped.size
        return event_id

    def resumes_a_request(self, event_id: EventId) -> bool:
        """Whether ``event_id`` is an event kept here of a request's stream, not of a session's
        own (GET) stream: what a drain waits for when a client resumes from it."""
        known = self._events.get(event_id)
        return known is not None and known.stream_id != GET_STREAM_KEY

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        known = self._events.get(last_event_id)
        if known is None:
            return None
        # Ids only grow, so what follows ``last_event_id`` in the dict is what the client missed.
        later = list(itertools.dropwhile(lambda event_id: event_id != last_event_id, self._events))[1:]
        for event_id in later:
            event = self._events.get(event_id)
            if event is not None and event.stream_id == known.stream_id and event.message is not None:
                await send_callback(EventMessage(event.message, event_id))
        return known.stream_id


__all__ = ["MAX_BYTES", "MAX_EVENTS", "RETRY_INTERVAL_MS", "BoundedEventStore", "StreamEventStore"]
