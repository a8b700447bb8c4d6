"""A tool call's deadline: set by its timeout, re-armed by each progress notification.

A long tool that reports progress is working, not hung, so each notification pushes the
deadline out by the timeout again, but never past ``PROGRESS_CEILING_FACTOR`` times the
timeout in total (a server that reports progress forever still ends). The deadline's scope
cancels the request, which cancels it on the server too (``notifications/cancelled``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Protocol

import anyio

from mcpfleet.errors import ToolCallError

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]


class RelayedProgress(Protocol):
    """What a request reports its progress to (the SDK's progress callback)."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...


PROGRESS_CEILING_FACTOR = 10
"""Progress keeps re-arming a call's deadline, up to this many times its timeout in total."""


class CallDeadline:
    """The deadline of one call of ``timeout_ms`` (0 for none), started when it is built.

    Kept by ``keeper`` (the connection's one timer for every call in flight) when it runs, or
    else by the scope's own deadline. ``async with`` it around the request: it swallows the
    deadline's cancellation (then see ``expired``)."""

    def __init__(
        self, timeout_ms: int, on_progress: ProgressCallback | None, keeper: DeadlineKeeper | None = None
    ) -> None:
        self.timeout_ms = timeout_ms
        self._bounded = timeout_ms > 0
        self._on_progress = on_progress
        self._started = anyio.current_time()
        self._timeout_s = timeout_ms / 1000
        self._ceiling = self._started + self._timeout_s * PROGRESS_CEILING_FACTOR
        self.at = self._started + self._timeout_s if self._bounded else math.inf
        """When the call is cancelled, unless progress moves it later."""
        self._keeper = keeper if self._bounded and keeper is not None and keeper.running else None
        self.scope = anyio.CancelScope(
            deadline=self.at if self._bounded and self._keeper is None else math.inf
        )

    def __enter__(self) -> anyio.CancelScope:
        if self._keeper is not None:
            self._keeper.track(self)
        return self.scope.__enter__()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        if self._keeper is not None:
            self._keeper.untrack(self)
        return self.scope.__exit__(exc_type, exc, traceback)

    @property
    def progress_callback(self) -> RelayedProgress | None:
        """What the request reports progress to: nothing when no one needs it."""
        return self._relay_progress if self._bounded or self._on_progress is not None else None

    async def _relay_progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._bounded:
            self.at = min(anyio.current_time() + self._timeout_s, self._ceiling)
            if self._keeper is None:
                self.scope.deadline = self.at
            # A kept deadline only moves later: the keeper finds it so when it wakes.
        if self._on_progress is not None:
            outcome = self._on_progress(progress, total, message)
            if inspect.isawaitable(outcome):
                await outcome

    def expired(self, *, server: str, tool: str) -> ToolCallError:
        """The error of a call whose deadline passed."""
        return call_expired(server=server, tool=tool, timeout_ms=self.timeout_ms, started=self._started)


def call_expired(*, server: str, tool: str, timeout_ms: int, started: float) -> ToolCallError:
    """The error of a call of ``timeout_ms`` started at ``started`` (anyio's clock) whose
    deadline passed now (a call sent below the SDK keeps its deadline itself, ``client.raw``)."""
    elapsed_ms = round((anyio.current_time() - started) * 1000)
    return ToolCallError(
        f'MCP tool {tool} on server "{server}" timed out after {elapsed_ms}ms '
        f"(timeout {timeout_ms}ms, re-armed by progress up to {PROGRESS_CEILING_FACTOR}x); "
        'raise "toolTimeout" in its config or pass a longer timeout to the call',
        server=server,
        tool=tool,
    )


class DeadlineKeeper:
    """One timer for the deadlines of every call in flight on one connection.

    A deadline of its own would give each call a timer to schedule and cancel in the event
    loop's heap, paid by every call though almost none of them runs out. Calls with the same
    timeout end in the order they started, so the keeper's single wake-up time only moves
    when a call with a shorter timeout starts; it wakes at the earliest deadline, cancels
    what has run out and sleeps until the next one. ``run`` it in a task for the connection's
    life; while it does not run, calls keep their own deadlines.
    """

    def __init__(self) -> None:
        self._calls: dict[CallDeadline, None] = {}
        """The bounded calls in flight (a dict: insertion-ordered, O(1) removal)."""
        self._sleep: anyio.CancelScope | None = None
        self.running = False

    def track(self, call: CallDeadline) -> None:
        self._calls[call] = None
        if self._sleep is not None and call.at < self._sleep.deadline:
            self._sleep.deadline = call.at

    def untrack(self, call: CallDeadline) -> None:
        self._calls.pop(call, None)

    async def run(self) -> None:
        self.running = True
        try:
            while True:
                now = anyio.current_time()
                earliest = math.inf
                for call in list(self._calls):
                    if call.at <= now:
                        del self._calls[call]
                        call.scope.cancel()
                    else:
                        earliest = min(earliest, call.at)
                with anyio.CancelScope(deadline=earliest) as self._sleep:
                    await anyio.sleep_forever()
        finally:
            self.running = False
            self._sleep = None
            # Calls still in flight when the connection stops keeping time: their own deadlines.
            for call in self._calls:
                call.scope.deadline = call.at
            self._calls.clear()


__all__ = ["PROGRESS_CEILING_FACTOR", "CallDeadline", "DeadlineKeeper", "ProgressCallback", "call_expired"]
