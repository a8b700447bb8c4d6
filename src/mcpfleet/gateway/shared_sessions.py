"""Handshake-era sessions that any replica serves: ``SharedSessions``, in front of the SDK's app.

A 2025-era client opens a session (``initialize``; the answer names it in ``Mcp-Session-Id``) and
sends every later request with that id, to whichever replica the load balancer picks. The SDK's
session manager knows only the sessions its own process opened (others get 404), so this layer:

- keeps each session opened here in ``SessionRecords`` (the client's ``initialize`` parameters
  and who opened it) before the client learns its id, and forgets it when the client ends it
  (``DELETE``, on whichever replica), which ends every replica's copy of it;
- serves a request whose session this process never saw by re-creating the SDK's session from
  that record (``client._sdk.adopt_http_session``: a connection born initialized with those
  parameters), when the request comes from the principal who opened it; anything else (no
  record, another principal) is left to the SDK, which answers 404 as for any unknown session;
- gives each session's streams an event store of the session's own (``event_store_for``), so a
  stream broken on one replica resumes with ``Last-Event-ID`` on another.

Only what the client said at ``initialize`` survives a move; what a session built up on the
replica that served it (a ``logging/setLevel``, resource subscriptions) is asked again by
clients that reconnect, as after any new session.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from mcpfleet.client._sdk import (
    adopt_http_session,
    http_session_transport,
    open_http_sessions,
    use_event_store,
)
from mcpfleet.gateway.http_fast import PARSED_BODY

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.server.streamable_http import EventStore
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

SESSION_HEADER = b"mcp-session-id"
MAX_SESSION_ID_CHARS = 128
"""A session id longer than this is nobody's (the SDK's are 32 hex digits): not looked up."""
TOUCH_INTERVAL_S = 5 * 60
"""A session in use has its record's expiry pushed back at most this often by each replica (far
inside the records' life, ``SessionRecords.load``), not on every request."""
MAX_TOUCHED = 10_000
MAX_RECORD_BYTES = 64 * 1024
"""A session whose ``initialize`` parameters take more than this is served by its own replica
only: a client cannot fill the shared store with what it sends (real clients send a few hundred
bytes)."""


class SessionRecords(Protocol):
    """Where the records of handshake-era sessions are kept for every replica."""

    async def save(self, session_id: str, record: bytes) -> None:
        """Keep ``record`` under ``session_id`` (best effort: a lost store loses it)."""

    async def load(self, session_id: str) -> bytes | None:
        """The record of ``session_id``, if one is kept (and keep it longer: it is in use)."""

    async def forget(self, session_id: str) -> None:
        """The client ended the session: forget it, and tell every replica (``on_forgotten``)."""

    def on_forgotten(self, listener: Callable[[str], Awaitable[None]]) -> None:
        """Call ``listener(session_id)`` when another replica forgot a session."""

    def event_store_for(self, session_id: str) -> EventStore:
        """The event store of ``session_id``'s streams."""


OwnerOf = Callable[["Scope"], "str | None"]
"""Who a request comes from, as a session's owner is recorded (``None``: nobody in particular)."""


class SharedSessions:
    """The ASGI layer of this module in front of ``app`` (the gateway's fast path and the SDK)."""

    def __init__(self, app: ASGIApp, server: Server[Any], records: SessionRecords, owner_of: OwnerOf) -> None:
        self.app = app
        self.server = server
        self.records = records
        self.owner_of = owner_of
        self._adopting = anyio.Lock()
        self._touched: dict[str, float] = {}
        records.on_forgotten(self._ended_elsewhere)
        self.adopted = 0
        """Sessions this process serves that another opened."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        session_id = _session_id(scope)
        if session_id is None:
            if scope["method"] == "POST" and _is_initialize(scope.get(PARSED_BODY)):
                await self.app(scope, receive, self._recording(scope, send))
                return
        else:
            await self._adopt_if_unknown(session_id, scope)
            if scope["method"] == "DELETE":
                await self.app(scope, receive, self._forgetting(session_id, send))
                return
        await self.app(scope, receive, send)

    def _recording(self, scope: Scope, send: Send) -> Send:
        """``send``, which keeps the session's record once its id is known, before the client
        learns it (so its next request may go to any replica)."""
        message = scope[PARSED_BODY]
        record = json.dumps({"params": message.get("params") or {}, "owner": self.owner_of(scope)}).encode()
        if len(record) > MAX_RECORD_BYTES:
            logger.warning(
                "a session's initialize parameters take %d bytes (over %d): served by this replica only",
                len(record),
                MAX_RECORD_BYTES,
            )
            return send

        async def recording(event: Message) -> None:
            if event["type"] == "http.response.start" and event["status"] < 400:
                session_id = next(
                    (
                        value.decode("latin-1")
                        for key, value in event.get("headers", [])
                        if key == SESSION_HEADER
                    ),
                    None,
                )
                if session_id is not None:
                    transport = http_session_transport(
                        self.server.session_manager, session_id, scope.get("user")
                    )
                    if transport is not None:
                        use_event_store(transport, self.records.event_store_for(session_id))
                    await self.records.save(session_id, record)
            await send(event)

        return recording

    def _forgetting(self, session_id: str, send: Send) -> Send:
        async def forgetting(event: Message) -> None:
            if event["type"] == "http.response.start" and event["status"] < 300:
                await self.records.forget(session_id)
            await send(event)

        return forgetting

    async def _adopt_if_unknown(self, session_id: str, scope: Scope) -> None:
        manager = self.server.session_manager
        if len(session_id) > MAX_SESSION_ID_CHARS:
            return
        if http_session_transport(manager, session_id, scope.get("user")) is not None:
            await self._touch(session_id)
            return
        async with self._adopting:
            if http_session_transport(manager, session_id, scope.get("user")) is not None:
                return  # adopted by a request that was waiting for the lock too
            raw = await self.records.load(session_id)
            record = _parsed(raw)
            if record is None:
                return
            if record.get("owner") != self.owner_of(scope):
                logger.warning("session %s was opened by another principal: not served here", session_id[:16])
                return
            params = record.get("params")
            if not isinstance(params, dict):
                return
            adopted = await adopt_http_session(
                manager, session_id, params, scope.get("user"), self.records.event_store_for(session_id)
            )
            if adopted:
                self._touched[session_id] = time.monotonic()
                self.adopted += 1
                logger.info("serving session %s, opened by another replica", session_id[:16])

    async def _ended_elsewhere(self, session_id: str) -> None:
        """Another replica ended ``session_id`` (its client's ``DELETE``): end this one's copy."""
        self._touched.pop(session_id, None)
        for transport in open_http_sessions(self.server.session_manager):
            if transport.mcp_session_id == session_id and not transport.is_terminated:
                await transport.terminate()

    async def _touch(self, session_id: str) -> None:
        """Keep the record of a session this replica serves alive while the session is in use."""
        now = time.monotonic()
        last = self._touched.get(session_id)
        if last is None:
            # Opened here (just recorded) or adopted: the record is fresh.
            if len(self._touched) >= MAX_TOUCHED:
                self._touched.clear()
            self._touched[session_id] = now
        elif now - last >= TOUCH_INTERVAL_S:
            self._touched[session_id] = now
            await self.records.load(session_id)


def _session_id(scope: Scope) -> str | None:
    found = [value for key, value in scope["headers"] if key == SESSION_HEADER]
    return found[0].decode("latin-1") if len(found) == 1 else None


def _is_initialize(message: Any) -> bool:
    return isinstance(message, dict) and message.get("method") == "initialize" and "id" in message


def _parsed(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


__all__ = ["OwnerOf", "SessionRecords", "SharedSessions"]
