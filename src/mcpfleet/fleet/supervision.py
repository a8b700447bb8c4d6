"""Supervision policy: when to reconnect a lost server, and when to stop trying.

The manager notices a lost transport and runs the reconnection (``fleet.recovery``); this
module decides the rhythm, with no I/O and an injectable clock. A lost server is retried
on a backoff ladder (0.5, 1, 2, 4 s by default). Every loss of an established connection
counts as a crash; more than ``crash_limit`` crashes within ``crash_window_s`` trip the
server's breaker:

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

__all__ = ["Breaker", "ReconnectPolicy", "Supervisor", "is_remote"]


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
    """False keeps the original behaviour: a lost server stays down until reconnected by hand."""


def is_remote(transport: str) -> bool:
    return transport in ("http", "sse")


@dataclass
class Breaker:
    """One server's recent crashes, and the reason it is suspended (None while it is not)."""

    policy: ReconnectPolicy
    clock: Callable[[], float] = time.monotonic
    suspension: str | None = None
    _crashes: deque[float] = field(default_factory=deque)

    def record_crash(self) -> bool:
        """Count one loss; True when that trips the breaker."""
        now = self.clock()
        self._crashes.append(now)
        self._prune(now)
        return len(self._crashes) > self.policy.crash_limit

    def recent_crashes(self) -> int:
        """Losses within the window."""
        self._prune(self.clock())
        return len(self._crashes)

    def reset(self) -> None:
        """Forget the history and lift any suspension: someone asked for the server again."""
        self._crashes.clear()
        self.suspension = None

    def _prune(self, now: float) -> None:
        while self._crashes and now - self._crashes[0] > self.policy.crash_window_s:
            self._crashes.popleft()


@dataclass(frozen=True)
class Supervisor:
    """The policy and the clock every server's breaker and retry rhythm are built from."""

    policy: ReconnectPolicy = field(default_factory=ReconnectPolicy)
    clock: Callable[[], float] = time.monotonic

    def breaker(self) -> Breaker:
        return Breaker(self.policy, self.clock)

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
