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
    """The deadline of one call of ``timeout_ms`` (0 for none), started when it is built."""

    def __init__(self, timeout_ms: int, on_progress: ProgressCallback | None) -> None:
        self.timeout_ms = timeout_ms
        self._bounded = timeout_ms > 0
        self._on_progress = on_progress
        self._started = anyio.current_time()
        self._timeout_s = timeout_ms / 1000
        self._ceiling = self._started + self._timeout_s * PROGRESS_CEILING_FACTOR
        self.scope = anyio.CancelScope(
            deadline=self._started + self._timeout_s if self._bounded else math.inf
        )
        """Wraps the request; it swallows the deadline's cancellation (then see ``expired``)."""

    @property
    def progress_callback(self) -> RelayedProgress | None:
        """What the request reports progress to: nothing when no one needs it."""
        return self._relay_progress if self._bounded or self._on_progress is not None else None

    async def _relay_progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self._bounded:
            self.scope.deadline = min(anyio.current_time() + self._timeout_s, self._ceiling)
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


__all__ = ["PROGRESS_CEILING_FACTOR", "CallDeadline", "ProgressCallback", "call_expired"]
