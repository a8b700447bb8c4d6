"""What the replicas of a team gateway share besides the durable state: ``TeamShared``.

PostgreSQL (``team.state``) keeps what must outlive every replica; ``TeamShared`` holds what the
replicas share while they run, and may lose:

- **messages** between replicas (``publish`` / ``listen``): a backend announced ``list_changed``
  (the other replicas re-list their own connection to it and tell their clients), or a replica
  loaded a new team file (the others read theirs again now rather than at their next poll);
- **call counters** (``count``): the calls a user made in the current minute, so ``limits:``
  hold across replicas (``team.limits``);
- **2025-era sessions** (``sessions``: each session's ``initialize`` parameters and owner, so any
  replica serves a session another opened; ``gateway.shared_sessions``) and **resumable streams**
  (``event_store``: the events of each SSE stream, so a stream resumes with ``Last-Event-ID``
  on another replica);
- **records** that expire (``put_record`` / ``get_record`` / ``delete_record``) and **claims**
  (``claim``: the first replica to claim a key gets it): which replica runs each per-user connect
  flow, and the connect passes already used (``team.connect_handoff``, ``team.connect_passes``),
  with messages to one replica (``send``) that tell the caller whether it still listens.

Records, claims and ``send`` raise ``TeamStateError`` while the shared state cannot be reached:
what they guard (a pass used once, a sign-in finished by the replica that started it) fails
closed, unlike counters and messages, which degrade to this replica.

Two implementations: ``RedisShared`` (``team.redis_shared``, ``state.redis``: any number of
replicas) and ``LocalShared`` here (no ``state.redis``: one replica; messages reach nobody,
counters and events live in this process, sessions stay with the SDK).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mcpfleet.gateway.resumption import StreamEventStore
    from mcpfleet.gateway.shared_sessions import SessionRecords

SharedMessage = dict[str, Any]
"""A message between replicas: JSON, with ``kind`` (``list_changed`` | ``reload`` |
``session_ended`` | ``credentials_changed`` | ``connect_callback`` | ``connect_result``) and what it
is about; ``replica`` (who sent it) is added by ``publish`` and ``send``."""
MessageListener = Callable[[SharedMessage], Awaitable[None]]
WINDOW_S = 60
"""Limits count calls per minute: per fixed window of this many seconds."""


class TeamShared(Protocol):
    """The replicas' shared ephemeral state (see the module)."""

    replica: str
    """This replica's own id (random per process): a message it sent is not handed back to it."""
    sessions: SessionRecords | None
    """Where 2025-era sessions are kept for every replica; ``None``: in this process only."""
    event_store: StreamEventStore
    """The resumable streams' events."""

    async def publish(self, message: SharedMessage) -> None:
        """Send ``message`` to every other replica (lost, and logged, while unreachable)."""

    async def send(self, replica: str, message: SharedMessage) -> bool:
        """Send ``message`` to ``replica`` alone; ``False`` when it does not listen (it stopped)."""

    def listen(self, listener: MessageListener) -> None:
        """Hand every other replica's messages (published, or sent to this one) to ``listener``."""

    async def claim(self, key: str, ttl_s: float) -> bool:
        """Claim ``key`` for ``ttl_s`` seconds: ``True`` for the first claim of any replica."""

    async def put_record(self, key: str, value: bytes, ttl_s: float) -> None:
        """Keep ``value`` under ``key`` for every replica, for ``ttl_s`` seconds."""

    async def get_record(self, key: str) -> bytes | None:
        """What ``put_record`` keeps under ``key``, unless it expired or was deleted."""

    async def delete_record(self, key: str) -> None:
        """Forget the record under ``key``."""

    async def count(self, key: str) -> int:
        """Count one call under ``key`` in the current minute; how many there were, this one in."""

    def seconds_left(self) -> int:
        """Seconds until the current minute's counters start again."""

    async def check(self) -> None:
        """Raise ``TeamStateError`` unless the shared state answers now (``/readyz``)."""

    async def aclose(self) -> None:
        """Stop listening and release connections."""


def window_now() -> int:
    """The number of the current counting window."""
    return int(time.time()) // WINDOW_S


def seconds_left_in_window() -> int:
    return WINDOW_S - int(time.time()) % WINDOW_S


class LocalCounters:
    """Call counters in this process: one replica's limits (or a replica's while Redis is lost)."""

    def __init__(self) -> None:
        self._window = window_now()
        self._counts: dict[str, int] = {}

    def count(self, key: str) -> int:
        window = window_now()
        if window != self._window:
            self._window, self._counts = window, {}
        found = self._counts[key] = self._counts.get(key, 0) + 1
        return found


class _LocalRecords:
    """Records and claims in this process, each until it expires (``time.monotonic``)."""

    def __init__(self) -> None:
        self._records: dict[str, tuple[float, bytes]] = {}

    def put(self, key: str, value: bytes, ttl_s: float, *, only_new: bool = False) -> bool:
        now = time.monotonic()
        self._records = {name: kept for name, kept in self._records.items() if kept[0] > now}
        if only_new and key in self._records:
            return False
        self._records[key] = (now + ttl_s, value)
        return True

    def get(self, key: str) -> bytes | None:
        kept = self._records.get(key)
        return kept[1] if kept is not None and kept[0] > time.monotonic() else None

    def delete(self, key: str) -> None:
        self._records.pop(key, None)


class LocalShared:
    """``TeamShared`` of a single replica (no ``state.redis``): see the module."""

    sessions: SessionRecords | None = None

    def __init__(self) -> None:
        from mcpfleet.gateway.resumption import BoundedEventStore

        self.replica = "local"
        self.event_store: StreamEventStore = BoundedEventStore()
        self._counters = LocalCounters()
        self._records = _LocalRecords()

    async def publish(self, message: SharedMessage) -> None:
        return None  # no other replica to tell

    async def send(self, replica: str, message: SharedMessage) -> bool:
        return False  # no other replica listens

    def listen(self, listener: MessageListener) -> None:
        return None

    async def claim(self, key: str, ttl_s: float) -> bool:
        return self._records.put(key, b"", ttl_s, only_new=True)

    async def put_record(self, key: str, value: bytes, ttl_s: float) -> None:
        self._records.put(key, value, ttl_s)

    async def get_record(self, key: str) -> bytes | None:
        return self._records.get(key)

    async def delete_record(self, key: str) -> None:
        self._records.delete(key)

    async def count(self, key: str) -> int:
        return self._counters.count(key)

    def seconds_left(self) -> int:
        return seconds_left_in_window()

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


__all__ = [
    "WINDOW_S",
    "LocalCounters",
    "LocalShared",
    "MessageListener",
    "SharedMessage",
    "TeamShared",
    "seconds_left_in_window",
    "window_now",
]
