"""``TeamShared`` on Redis (``state.redis``): what the replicas of a team gateway share while they run.

Every key lives under one namespace, ``mcpfleet:<digest of public_url>:`` by default, so several
team gateways can use one Redis without meeting:

- messages: one pub/sub channel, ``<ns>messages``, carrying JSON, and one per replica,
  ``<ns>replica:<id>``, for messages to it alone (``send``: Redis says how many listened, so a
  replica that stopped is known at once); a listener task per replica subscribes to both, and
  again (with a growing pause) whenever the connection drops;
- records and claims: ``<ns>record:<key>`` (``SET … PX``) and ``<ns>claim:<key>``
  (``SET … NX PX``), expiring; these fail (``TeamStateError``) while Redis cannot be reached;
- counters: ``<ns>calls:<window>:<key>``, ``INCR`` then ``EXPIRE`` (two windows) in one
  transaction; while Redis cannot be reached the replica counts in its own memory (its limit
  then holds for its own calls only) and says so once on the log;
- sessions (``gateway.shared_sessions.SessionRecords``): ``<ns>session:<id>``, expiring after
  ``SESSION_TTL_S`` without a request;
- stream events (``RedisEventStore``): one Redis stream per SSE stream of each session,
  ``<ns>events:<session>:<stream id>``, capped (1024 events, a message over 1 MiB kept as a mark
  only) and expiring. An event id is ``<stream id>/<entry id>``, so a replica that never saw the
  stream finds it from the id alone; replaying waits for the stream's answer when it is not in
  yet (the replica that runs the call is still at it), so a stream resumed on another replica
  gets everything the first one sends, to the end. While Redis cannot be reached, events go to
  this replica's own bounded store (a stream then resumes on this replica only).

What a lost Redis costs is in docs/team.md ("Running more than one replica").
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse
from pydantic import TypeAdapter, ValidationError

from mcpfleet.gateway.resumption import BoundedEventStore, StreamEventStore
from mcpfleet.redaction import redact_text
from mcpfleet.team.shared import (
    WINDOW_S,
    LocalCounters,
    MessageListener,
    SharedMessage,
    seconds_left_in_window,
    window_now,
)
from mcpfleet.team.state import TeamStateError

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from mcpfleet.gateway.shared_sessions import SessionRecords

logger = logging.getLogger(__name__)

SESSION_TTL_S = 30 * 60
"""A session nobody used for this long is forgotten (the SDK's own idle timeout)."""
STREAM_MAX_EVENTS = 1024
"""Events kept per SSE stream."""
STREAM_TTL_S = 10 * 60
MAX_EVENT_BYTES = 1024 * 1024
"""A message larger than this is not kept for replay (a mark takes its place, so a replay still
knows when the stream's answer went out): Redis's memory stays bounded by what streams carry."""
"""A stream's events are kept this long after its last one."""
REPLAY_WAIT_S = 5 * 60
"""How long a resumed stream waits for the answer of a call another replica is still running."""
CONNECT_TIMEOUT_S = 5.0
RETRIES = 3
RESUBSCRIBE_MIN_PAUSE_S = 0.1
RESUBSCRIBE_MAX_PAUSE_S = 5.0
_MESSAGE = TypeAdapter(JSONRPCMessage)
T = TypeVar("T")


def default_namespace(public_url: str) -> str:
    """The keys' prefix of the team gateway that serves ``public_url``: its replicas share it."""
    return f"mcpfleet:{hashlib.sha256(public_url.encode()).hexdigest()[:16]}:"


def _where(url: str) -> str:
    return redact_text(url)


def _ms(seconds: float) -> int:
    """A lifetime in whole milliseconds, at least one (Redis refuses zero)."""
    return max(1, int(seconds * 1000))


class RedisShared:
    """``TeamShared`` on one Redis (see the module)."""

    def __init__(self, client: Redis, url: str, namespace: str) -> None:
        self.replica = secrets.token_hex(6)
        self.client = client
        self.url = url
        self.namespace = namespace
        self.events = RedisEventStore(self)
        self.event_store: StreamEventStore = self.events
        self.sessions: SessionRecords | None = RedisSessions(self, self.events)
        self._listeners: list[MessageListener] = []
        self._local_counters = LocalCounters()
        self._lost_reported = False
        self._task_group: anyio.abc.TaskGroup | None = None
        self._listening = False
        self.subscribed = anyio.Event()
        """Set each time the listener has (re)subscribed (tests wait on it)."""

    @classmethod
    async def open(cls, url: str, namespace: str) -> RedisShared:
        """Connect to ``url`` and check it answers (``TeamStateError`` naming it otherwise)."""
        try:
            from redis.asyncio import Redis
        except ImportError as error:
            raise TeamStateError(
                f"state.redis needs redis-py, which is not installed ({error}); "
                "install team mode's extra: pip install 'mcpfleet[team]'"
            ) from error
        client = Redis.from_url(
            url, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=CONNECT_TIMEOUT_S
        )
        shared = cls(client, url, namespace)
        try:
            await shared.check()
        except TeamStateError:
            await client.aclose()
            raise
        return shared

    def key(self, *parts: str) -> str:
        return self.namespace + ":".join(parts)

    async def attempt(self, command: Callable[[], Awaitable[T]]) -> T:
        """``command()``, once more on fresh connections if the pool's failed: a Redis that
        restarted closed every pooled connection, and redis-py's own retry does not cover each
        way a closed one fails. Only the idle ones are dropped: the listener's subscription holds
        one, and cutting it would lose the messages sent until it subscribes again."""
        from redis.exceptions import ConnectionError as RedisConnectionError

        try:
            return await command()
        except RedisConnectionError:
            await self.client.connection_pool.disconnect(inuse_connections=False)
            return await command()

    # -- lifetime -------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen to the other replicas until cancelled (subscribing again after each loss)."""
        pause = RESUBSCRIBE_MIN_PAUSE_S
        task_status.started()
        while True:
            self._listening = False
            try:
                await self._listen_once()
            except Exception as error:  # redis-py's errors, and a connection cut mid-read
                self.lost(error)
                # A subscription that held starts the pauses again: the messages sent to this
                # replica while it is not subscribed are lost.
                pause = (
                    RESUBSCRIBE_MIN_PAUSE_S if self._listening else min(pause * 2, RESUBSCRIBE_MAX_PAUSE_S)
                )
                await anyio.sleep(pause)

    async def _listen_once(self) -> None:
        async with self.client.pubsub(ignore_subscribe_messages=True) as pubsub:
            await pubsub.subscribe(self.key("messages"), self.key("replica", self.replica))
            self._listening = True
            self.found()
            self.subscribed.set()
            self.subscribed = anyio.Event()
            while True:
                raw = await pubsub.get_message(timeout=1.0)
                if raw is None or raw.get("type") != "message":
                    continue
                await self._deliver(raw.get("data"))

    async def _deliver(self, data: Any) -> None:
        try:
            message = json.loads(data)
        except (TypeError, ValueError):
            logger.warning(
                "mcpfleet serve --team: a message on %s is not JSON; ignored", self.key("messages")
            )
            return
        if not isinstance(message, dict) or message.get("replica") == self.replica:
            return
        for listener in list(self._listeners):
            try:
                await listener(message)
            except Exception:
                logger.exception(
                    "mcpfleet serve --team: handling another replica's %r failed", message.get("kind")
                )

    async def aclose(self) -> None:
        await self.client.aclose()

    def lost(self, error: BaseException) -> None:
        """Say once that Redis cannot be reached (and again once it is back, ``found``)."""
        if not self._lost_reported:
            self._lost_reported = True
            logger.error(
                "mcpfleet serve --team: Redis (%s) cannot be reached (%s); serving on: limits counted per "
                "replica, other replicas not told of changes, new sessions kept on this replica only, "
                "connect links and per-user connects refused",
                _where(self.url),
                redact_text(str(error) or type(error).__name__),
            )

    def found(self) -> None:
        if self._lost_reported:
            self._lost_reported = False
            logger.warning("mcpfleet serve --team: Redis (%s) reached again", _where(self.url))

    # -- TeamShared -----------------------------------------------------------------------------------

    async def publish(self, message: SharedMessage) -> None:
        try:
            text = json.dumps({**message, "replica": self.replica})
            await self.attempt(lambda: self.client.publish(self.key("messages"), text))
        except Exception as error:
            self.lost(error)

    async def send(self, replica: str, message: SharedMessage) -> bool:
        text = json.dumps({**message, "replica": self.replica})
        channel = self.key("replica", replica)
        listening = await self._required(lambda: self.client.publish(channel, text))
        return int(listening) > 0

    def listen(self, listener: MessageListener) -> None:
        self._listeners.append(listener)

    async def claim(self, key: str, ttl_s: float) -> bool:
        name = self.key("claim", key)
        claimed = await self._required(lambda: self.client.set(name, b"1", nx=True, px=_ms(ttl_s)))
        return bool(claimed)

    async def put_record(self, key: str, value: bytes, ttl_s: float) -> None:
        name = self.key("record", key)
        await self._required(lambda: self.client.set(name, value, px=_ms(ttl_s)))

    async def get_record(self, key: str) -> bytes | None:
        name = self.key("record", key)
        found = await self._required(lambda: self.client.get(name))
        if found is None:
            return None
        return found.encode() if isinstance(found, str) else bytes(found)

    async def delete_record(self, key: str) -> None:
        name = self.key("record", key)
        await self._required(lambda: self.client.delete(name))

    async def _required(self, command: Callable[[], Awaitable[T]]) -> T:
        """``command()``, or ``TeamStateError`` naming Redis when it cannot be reached: for what
        must fail closed rather than fall back to this replica."""
        try:
            done = await self.attempt(command)
        except Exception as error:
            self.lost(error)
            raise self._unreachable(error) from error
        self.found()
        return done

    async def count(self, key: str) -> int:
        window = window_now()
        name = self.key("calls", str(window), key)

        async def counted() -> Any:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.incr(name)
                pipe.expire(name, 2 * WINDOW_S)
                found, _ = await pipe.execute()
                return found

        try:
            found = await self.attempt(counted)
        except Exception as error:
            self.lost(error)
            return self._local_counters.count(key)
        self.found()
        return int(found)

    def seconds_left(self) -> int:
        return seconds_left_in_window()

    async def check(self) -> None:
        try:
            await self.attempt(self.client.ping)
        except Exception as error:
            raise self._unreachable(error) from error

    def _unreachable(self, error: BaseException) -> TeamStateError:
        reason = redact_text(str(error) or type(error).__name__).rstrip(".")
        return TeamStateError(
            f"the shared state (Redis, {_where(self.url)}) cannot be reached: {reason}; "
            "check state.redis and that Redis runs"
        )


class RedisSessions:
    """2025-era sessions' records (``gateway.shared_sessions.SessionRecords``) in Redis."""

    def __init__(self, shared: RedisShared, events: RedisEventStore) -> None:
        self.shared = shared
        self.events = events

    def event_store_for(self, session_id: str) -> EventStore:
        return self.events.bound(session_id)

    async def save(self, session_id: str, record: bytes) -> None:
        try:
            key = self.shared.key("session", session_id)
            await self.shared.attempt(lambda: self.shared.client.set(key, record, ex=SESSION_TTL_S))
        except Exception as error:
            self.shared.lost(error)

    async def load(self, session_id: str) -> bytes | None:
        client = self.shared.client
        try:
            key = self.shared.key("session", session_id)
            found = await self.shared.attempt(lambda: client.getex(key, ex=SESSION_TTL_S))
        except Exception as error:
            self.shared.lost(error)
            return None
        if found is None:
            return None
        return found.encode() if isinstance(found, str) else bytes(found)

    async def forget(self, session_id: str) -> None:
        try:
            key = self.shared.key("session", session_id)
            await self.shared.attempt(lambda: self.shared.client.delete(key))
        except Exception as error:
            self.shared.lost(error)
        await self.shared.publish({"kind": "session_ended", "session": session_id})

    def on_forgotten(self, listener: Callable[[str], Awaitable[None]]) -> None:
        async def ended(message: SharedMessage) -> None:
            session_id = message.get("session")
            if message.get("kind") == "session_ended" and isinstance(session_id, str):
                await listener(session_id)

        self.shared.listen(ended)


class RedisEventStore(StreamEventStore):
    """Resumable SSE streams in Redis (see the module), of one session once ``bound`` to it."""

    def __init__(
        self, shared: RedisShared, session: str | None = None, fallback: BoundedEventStore | None = None
    ) -> None:
        self.shared = shared
        self.session = session
        self.fallback = fallback if fallback is not None else BoundedEventStore()
        """Where events go while Redis cannot be reached, or before the session is known (the
        ``initialize`` answer's own stream): this replica only."""

    def resumes_a_request(self, event_id: EventId) -> bool:
        """Ids here name their stream (``<stream>/<entry>``); an id without one is the fallback's,
        kept while Redis was lost."""
        stream_id, slash, _ = event_id.rpartition("/")
        if not slash:
            return self.fallback.resumes_a_request(event_id)
        return stream_id != GET_STREAM_KEY

    def bound(self, session: str) -> RedisEventStore:
        """The store of ``session``'s streams: keyed by it, so no other session replays them."""
        return RedisEventStore(self.shared, session, self.fallback)

    def _stream_key(self, stream_id: StreamId) -> str:
        assert self.session is not None
        return self.shared.key("events", self.session, stream_id)

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        if self.session is None:
            return await self.fallback.store_event(stream_id, message)
        data = b"" if message is None else message.model_dump_json(by_alias=True, exclude_none=True).encode()
        if len(data) > MAX_EVENT_BYTES:
            data = b""
        final = isinstance(message, JSONRPCResponse | JSONRPCError)
        key = self._stream_key(stream_id)
        try:
            async with self.shared.client.pipeline(transaction=True) as pipe:
                pipe.xadd(
                    key, {"m": data, "f": b"1" if final else b"0"}, maxlen=STREAM_MAX_EVENTS, approximate=True
                )
                pipe.expire(key, STREAM_TTL_S)
                entry, _ = await pipe.execute()
        except Exception as error:
            self.shared.lost(error)
            return await self.fallback.store_event(stream_id, message)
        entry_id = entry.decode() if isinstance(entry, bytes) else str(entry)
        return f"{stream_id}/{entry_id}"

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        stream_id, slash, entry_id = last_event_id.rpartition("/")
        if self.session is None or not slash or not stream_id:
            return await self.fallback.replay_events_after(last_event_id, send_callback)
        key = self._stream_key(stream_id)
        client = self.shared.client
        try:
            if not await self.shared.attempt(lambda: client.exists(key)):
                return None
            with anyio.move_on_after(REPLAY_WAIT_S):
                while True:
                    found: Any = await client.xread({key: entry_id}, count=100, block=1000)
                    for _, entries in found or []:
                        for raw_id, fields in entries:
                            entry_id = raw_id.decode() if isinstance(raw_id, bytes) else str(raw_id)
                            final = await self._send(stream_id, entry_id, fields, send_callback)
                            if final:
                                return stream_id
        except Exception as error:
            self.shared.lost(error)
            return None
        return stream_id

    async def _send(
        self, stream_id: StreamId, entry_id: str, fields: dict[bytes, bytes], send_callback: EventCallback
    ) -> bool:
        """Send one stored event; whether it was the stream's answer (the last it will have)."""
        data = fields.get(b"m", b"")
        final = fields.get(b"f") == b"1"
        if not data:
            return final
        try:
            message = _MESSAGE.validate_json(data)
        except ValidationError:
            logger.warning(
                "mcpfleet serve --team: a stored event of stream %s does not parse; skipped", stream_id
            )
            return False
        await send_callback(EventMessage(message, f"{stream_id}/{entry_id}"))
        return final


__all__ = ["SESSION_TTL_S", "RedisEventStore", "RedisSessions", "RedisShared", "default_namespace"]
