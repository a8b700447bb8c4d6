"""What the fleet tells the world: one event per state change of one server.

Two ways to follow the fleet, both fed by the same ``EventHub``:

* ``async with manager.events() as stream: async for event in stream`` — a bounded
  buffer per reader. A reader that falls more than ``buffer`` events behind loses the
  *oldest* ones (the newest state is what matters) and ``stream.dropped`` counts them;
  the fleet never waits for a slow reader.
* ``manager.subscribe(listener)`` — a callback run in place, before the call that caused
  the change returns. That is what lets a session swap its tools before
  ``disconnect_server`` or a reload returns, so it stays a direct call rather than a
  reader of the stream. A listener may return an awaitable: the hub runs it in the
  task group the manager owns (so it is awaited, and cancelled when the manager
  closes), never as a detached task.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

logger = logging.getLogger(__name__)

EventKind = Literal[
    "connecting",
    "connected",
    "failed",
    "reconnecting",
    "disconnected",
    "tools_changed",
    "resources_changed",
    "prompts_changed",
]

DEFAULT_STREAM_BUFFER = 256
"""Events one ``events()`` reader may have unread before the oldest are dropped."""


@dataclass(frozen=True)
class ManagerEvent:
    """A state change of one server, delivered to every subscriber."""

    kind: EventKind
    server: str
    error: str | None = None
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    announced: bool = False
    """The server itself announced this change (its ``list_changed``), rather than the fleet
    seeing it (a connection, a reconnection, a removal). ``tools_changed`` then follows the
    re-list even when the tools came back the same, so a consumer that passes announcements on
    (the gateway) tells its own clients of every one."""


EventListener = Callable[[ManagerEvent], Awaitable[None] | None]


class EventStream:
    """One reader's view of the fleet's events, in order; iteration ends when the manager closes."""

    def __init__(self, receiver: MemoryObjectReceiveStream[ManagerEvent]) -> None:
        self._receiver = receiver
        self.dropped = 0
        """Events lost because this reader fell more than its buffer behind."""

    async def receive(self) -> ManagerEvent:
        """The next event; raises ``anyio.EndOfStream`` once the manager has closed."""
        return await self._receiver.receive()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> ManagerEvent:
        try:
            return await self._receiver.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


@dataclass
class _Reader:
    sender: MemoryObjectSendStream[ManagerEvent]
    receiver: MemoryObjectReceiveStream[ManagerEvent]
    stream: EventStream
    buffer: int
    warned: bool = False


class EventHub:
    """Delivers every event to the listeners and the stream readers, and wakes waiters."""

    def __init__(self) -> None:
        self._listeners: list[EventListener] = []
        self._readers: list[_Reader] = []
        self._changed = anyio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None

    def attach(self, task_group: anyio.abc.TaskGroup | None) -> None:
        """The task group that runs listeners' awaitables (None: the manager is closed)."""
        self._task_group = task_group

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        """Call ``listener`` on every event; returns the function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    @asynccontextmanager
    async def stream(self, buffer: int = DEFAULT_STREAM_BUFFER) -> AsyncIterator[EventStream]:
        """A bounded reader of every event emitted while the block runs."""
        if buffer < 1:
            raise ValueError(f"an event stream needs a buffer of at least 1 event, not {buffer}")
        sender, receiver = anyio.create_memory_object_stream[ManagerEvent](buffer)
        reader = _Reader(sender, receiver, EventStream(receiver), buffer)
        self._readers.append(reader)
        try:
            yield reader.stream
        finally:
            if reader in self._readers:
                self._readers.remove(reader)
            sender.close()
            receiver.close()

    def emit(self, event: ManagerEvent) -> None:
        for listener in list(self._listeners):
            self.call(listener, event, what=f"{event.kind} {event.server}")
        for reader in list(self._readers):
            self._offer(reader, event)
        self.notify_change()

    def call(self, listener: Callable[..., Awaitable[None] | None], *args: Any, what: str) -> None:
        """Run one listener in place; an awaitable it returns runs in the manager's task group."""
        try:
            outcome = listener(*args)
        except Exception:
            logger.exception("MCP listener failed on %s", what)
            return
        if outcome is None:
            return
        if self._task_group is None:
            # The manager has closed: nothing may outlive it, so the awaitable is not run.
            close = getattr(outcome, "close", None)
            if callable(close):
                close()
            return
        self._task_group.start_soon(_await_listener, outcome, what, name=f"mcpfleet listener {what}")

    def notify_change(self) -> None:
        """Wake every task waiting in ``wait_for_change``."""
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for_change(self) -> None:
        """Return at the next event (or ``notify_change``)."""
        await self._changed.wait()

    def close(self) -> None:
        """End every reader's iteration once it has read what was already sent."""
        for reader in self._readers:
            reader.sender.close()
        self._readers.clear()
        self._task_group = None

    def _offer(self, reader: _Reader, event: ManagerEvent) -> None:
        try:
            reader.sender.send_nowait(event)
            return
        except anyio.WouldBlock:
            pass
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return
        # Full: drop the oldest unread event so the newest state always gets through.
        try:
            reader.receiver.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
            return
        reader.stream.dropped += 1
        if not reader.warned:
            reader.warned = True
            logger.warning(
                "An MCP event reader fell more than %d events behind; its oldest events are dropped",
                reader.buffer,
            )
        reader.sender.send_nowait(event)


async def _await_listener(outcome: Awaitable[None], what: str) -> None:
    try:
        await outcome
    except Exception:
        logger.exception("MCP listener failed on %s", what)
