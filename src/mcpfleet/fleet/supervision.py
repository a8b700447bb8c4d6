"""Supervision policy (B1): when to reconnect a lost server, and when to stop trying.

The manager notices a lost transport and runs the reconnection; this module decides the
rhythm. A lost server is retried on a backoff ladder (0.5, 1, 2, 4 s by default). Every
loss of an established connection counts as a crash; more than ``crash_limit`` crashes
within ``crash_window_s`` trip the breaker:

* a stdio server is then *suspended*: no more respawns until someone asks
  (``/mcp reconnect NAME``, ``reload``), so a server that dies at start-up cannot
  fork-storm the machine;
* a remote (http/sse) server costs nothing to retry, and networks come back: it keeps
  being retried quietly, on a doubling backoff capped at ``remote_retry_max_s``.

A stdio server that cannot be restarted within its ladder is reported failed; a remote one
goes on with the quiet capped backoff. The numbers are constructor parameters so tests can
run a whole crash loop in a second.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["ReconnectPolicy", "ServerState", "ServerStateName", "Supervisor", "is_remote"]

ServerStateName = Literal["connecting", "connected", "reconnecting", "suspended", "failed", "disconnected"]


@dataclass(frozen=True)
class ReconnectPolicy:
    """How a lost server is brought back. The defaults are the product's behaviour."""

    ladder_s: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    """Delay before each reconnect attempt after a loss."""
    crash_limit: int = 5
    """More crashes than this within ``crash_window_s`` trip the breaker."""
    crash_window_s: float = 30.0
    remote_retry_max_s: float = 60.0
    """Cap of the quiet backoff that keeps retrying a lost remote server."""
    call_wait_s: float = 10.0
    """How long a tool call waits for a reconnecting server before it returns an error."""
    auto_reconnect: bool = True
    """False keeps the seed's behaviour: a lost server stays down until reconnected by hand."""


@dataclass(frozen=True)
class ServerState:
    """One server's health, for ``status`` and ``/mcp list``."""

    name: str
    state: ServerStateName
    last_error: str | None = None
    stderr_tail: tuple[str, ...] = ()
    """The last lines the server wrote on stderr (stdio; kept from the lost process)."""
    pid: int | None = None
    recent_crashes: int = 0
    """Losses within the breaker's window."""


def is_remote(transport: str) -> bool:
    return transport in ("http", "sse")


@dataclass
class Supervisor:
    """Crash history and suspensions of every server of one manager."""

    policy: ReconnectPolicy = field(default_factory=ReconnectPolicy)
    clock: Callable[[], float] = time.monotonic
    _crashes: dict[str, deque[float]] = field(default_factory=dict)
    _suspended: dict[str, str] = field(default_factory=dict)

    def record_crash(self, name: str) -> bool:
        """Count one loss of ``name``; True when that trips the breaker."""
        now = self.clock()
        history = self._crashes.setdefault(name, deque())
        history.append(now)
        self._prune(history, now)
        return len(history) > self.policy.crash_limit

    def recent_crashes(self, name: str) -> int:
        history = self._crashes.get(name)
        if not history:
            return 0
        self._prune(history, self.clock())
        return len(history)

    def suspend(self, name: str, reason: str) -> None:
        self._suspended[name] = reason

    def suspension(self, name: str) -> str | None:
        """Why ``name`` is suspended, or None when it is not."""
        return self._suspended.get(name)

    def forget(self, name: str) -> None:
        """Clear the history and any suspension: a manual reconnect, or the server was removed."""
        self._crashes.pop(name, None)
        self._suspended.pop(name, None)

    def suspension_message(self, name: str) -> str:
        window = f"{self.policy.crash_window_s:g}"
        return (
            f'MCP server "{name}" crashed more than {self.policy.crash_limit} times within {window} s; '
            f"automatic reconnects are suspended: fix it, then run /mcp reconnect {name}"
        )

    def retry_delays(self, transport: str, *, quiet: bool = False) -> Iterator[float]:
        """Delays before each attempt: the ladder, then (remote servers only) a capped backoff forever.

        ``quiet`` skips the ladder: a remote server that tripped the breaker goes straight to
        the slow rhythm.
        """
        ladder = self.policy.ladder_s or (0.5,)
        if not quiet:
            yield from ladder
        if not is_remote(transport):
            return
        delay = ladder[-1]
        while True:
            delay = min(delay * 2, self.policy.remote_retry_max_s)
            yield delay

    def _prune(self, history: deque[float], now: float) -> None:
        while history and now - history[0] > self.policy.crash_window_s:
            history.popleft()
