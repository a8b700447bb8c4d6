"""The event hub without any server: listeners in place, bounded streams, owned listener tasks."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Coroutine
from typing import Any

import anyio
import pytest

from mcpfleet.fleet.events import EventHub, ManagerEvent

pytestmark = pytest.mark.anyio


def event(kind: str = "connected", server: str = "files") -> ManagerEvent:
    return ManagerEvent(kind, server)  # type: ignore[arg-type]


async def test_a_listener_runs_before_emit_returns_until_it_unsubscribes() -> None:
    hub = EventHub()
    seen: list[str] = []
    unsubscribe = hub.subscribe(lambda e: seen.append(e.server))
    hub.emit(event(server="one"))
    assert seen == ["one"]
    unsubscribe()
    unsubscribe()  # twice is harmless
    hub.emit(event(server="two"))
    assert seen == ["one"]


async def test_a_failing_listener_does_not_starve_the_others(caplog: pytest.LogCaptureFixture) -> None:
    hub = EventHub()
    seen: list[str] = []

    def broken(_: ManagerEvent) -> None:
        raise ValueError("listener bug")

    hub.subscribe(broken)
    hub.subscribe(lambda e: seen.append(e.kind))
    with caplog.at_level(logging.ERROR, logger="mcpfleet"):
        hub.emit(event("failed"))
    assert seen == ["failed"]
    assert any("listener failed on failed files" in r.getMessage() for r in caplog.records)


async def test_an_async_listener_runs_in_the_task_group_the_hub_is_given() -> None:
    hub = EventHub()
    done: list[str] = []

    async def slow(e: ManagerEvent) -> None:
        await anyio.sleep(0.05)
        done.append(e.server)

    hub.subscribe(slow)
    async with anyio.create_task_group() as group:
        hub.attach(group)
        hub.emit(event(server="awaited"))
        assert done == []  # not run in place: it waits for nobody
    assert done == ["awaited"]  # the group did not end before it


async def test_without_a_task_group_an_async_listener_is_closed_not_left_unawaited() -> None:
    hub = EventHub()
    made: list[Coroutine[Any, Any, None]] = []

    async def later(_: ManagerEvent) -> None:
        raise AssertionError("never runs: the manager has closed")

    def listener(e: ManagerEvent) -> Coroutine[Any, Any, None]:
        made.append(later(e))
        return made[-1]

    hub.subscribe(listener)
    hub.emit(event())
    assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED


async def test_a_stream_keeps_the_newest_events_when_its_reader_falls_behind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hub = EventHub()
    with caplog.at_level(logging.WARNING, logger="mcpfleet"):
        async with hub.stream(buffer=3) as stream:
            for index in range(10):
                hub.emit(event(server=f"s{index}"))
            assert [(await stream.receive()).server for _ in range(3)] == ["s7", "s8", "s9"]
            assert stream.dropped == 7
            hub.emit(event(server="after"))
            assert (await stream.receive()).server == "after"
    warnings = [r for r in caplog.records if "fell more than 3 events behind" in r.getMessage()]
    assert len(warnings) == 1


async def test_closing_the_hub_ends_every_reader_after_what_was_sent() -> None:
    hub = EventHub()
    async with hub.stream() as first, hub.stream() as second:
        hub.emit(event(server="last"))
        hub.close()
        assert [e.server async for e in first] == ["last"]
        assert [e.server async for e in second] == ["last"]
        with pytest.raises(anyio.EndOfStream):
            await first.receive()


async def test_a_stream_left_is_no_longer_fed() -> None:
    hub = EventHub()
    async with hub.stream(buffer=1) as stream:
        pass
    hub.emit(event())  # nobody reads it, and nothing breaks
    with pytest.raises(anyio.ClosedResourceError):
        await stream.receive()


async def test_waiters_wake_on_the_next_event() -> None:
    hub = EventHub()
    woke: list[bool] = []

    async def wait() -> None:
        await hub.wait_for_change()
        woke.append(True)

    async with anyio.create_task_group() as group:
        group.start_soon(wait)
        await anyio.sleep(0.01)
        assert woke == []
        hub.emit(event())
    assert woke == [True]


def test_a_stream_needs_room_for_one_event() -> None:
    async def open_empty() -> None:
        async with EventHub().stream(buffer=0):
            pass

    with pytest.raises(ValueError, match="at least 1 event"):
        anyio.run(open_empty)
