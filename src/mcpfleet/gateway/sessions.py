"""The gateway's clients: one ``ClientSession`` per connected client, in one registry.

A handshake-era client (``initialize``) has one SDK ``Connection`` for its whole life, over
stdio or one streamable-HTTP session: the registry keeps a ``ClientSession`` for it from its
first message until that connection closes, and ``notify_all`` sends it the gateway's
``list_changed`` notifications on its standalone channel. A 2026-07-28 client has no
session: every request carries its own envelope, so each request gets a transient
``ClientSession`` (never registered), and change notifications reach such clients only on
the ``subscriptions/listen`` streams they open (see ``gateway.handlers``).

The relay reads ``session_for(ctx)`` to know who asked, what that client declared it can
do (``capabilities``) and how to reach it (``sdk_session``).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from mcpfleet.client._sdk import server_connection_of

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

    from mcpfleet.gateway.served_catalog import ServedCatalog

logger = logging.getLogger(__name__)

ClientEra = Literal["legacy", "modern"]

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
"""MCP's log levels (RFC 5424), least severe first."""


def _severity(level: str) -> int:
    return LOG_LEVELS.index(level) if level in LOG_LEVELS else len(LOG_LEVELS)


@dataclass(eq=False)
class ClientSession:
    """One client of the gateway, as the SDK lets the gateway see and reach it."""

    era: ClientEra
    protocol_version: str
    sdk_session: ServerSession | None
    """The SDK's handle: ``send_notification`` without ``related_request_id`` goes out on the
    client's standalone channel, ``send_request`` (handshake era only) asks the client. Always
    set for a registered client; ``None`` for a 2026-07-28 request the HTTP gateway's fast path
    answers without the SDK's server (``gateway.http_fast``)."""
    capabilities: dict[str, Any] = field(default_factory=dict)
    """What the client declared (``sampling``, ``elicitation``, ``roots``…), as JSON."""
    client_name: str | None = None
    log_level: str | None = None
    """The least severe backend log level the client asked for (``logging/setLevel``); ``None``
    until it asks, and then every level is relayed."""
    bound: bool = False
    """Whether ``viewer`` is set: a handshake-era session is bound to the viewer of its first
    request when a guard has an opinion (``gateway.views``)."""
    viewer: Hashable = None
    """Who this session serves, as the gateway's guard sees them (``gateway.guard``)."""
    view: ServedCatalog | None = None
    """What the session was last told it sees: its ``list_changed`` notices compare against it."""

    @classmethod
    def for_request(
        cls, era: ClientEra, protocol_version: str, capabilities: dict[str, Any], client_name: str | None
    ) -> ClientSession:
        """The client of one request answered without the SDK's server (never registered)."""
        return cls(era, protocol_version, None, capabilities, client_name)

    @property
    def registered(self) -> bool:
        """Whether it lives in the registry (handshake era) rather than for one request."""
        return self.era == "legacy"

    def wants_log(self, level: str) -> bool:
        """Whether a backend log message at ``level`` goes to this client."""
        if self.log_level is None:
            return True
        return _severity(level) >= _severity(self.log_level)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification on the client's standalone channel; never raises: a client that
        went away misses it, as the protocol allows."""
        import mcp_types

        if self.sdk_session is None:
            return  # a request's own client: nothing reaches it but that request's answer
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        try:
            notification = mcp_types.server_notification_adapter.validate_python(message, by_name=False)
        except ValueError as error:
            logger.warning("not relaying a malformed %s: %s", method, error)
            return
        try:
            await self.sdk_session.send_notification(notification)
        except Exception as error:
            logger.debug("could not send %s to a client: %r", method, error)


def named_in_meta(meta: Any) -> str | None:
    """The client's name in a 2026-07-28 request's ``_meta`` (there is no ``initialize``)."""
    from mcp_types import CLIENT_INFO_META_KEY

    info = meta.get(CLIENT_INFO_META_KEY) if isinstance(meta, dict) else None
    name = info.get("name") if isinstance(info, dict) else None
    return name if isinstance(name, str) else None


class ClientSessions:
    """Every handshake-era client connected now, keyed by its SDK connection."""

    def __init__(self) -> None:
        self._by_connection: weakref.WeakKeyDictionary[Connection, ClientSession] = (
            weakref.WeakKeyDictionary()
        )
        self._by_session_id: dict[str, ClientSession] = {}
        """The registered clients of streamable HTTP sessions, by ``Mcp-Session-Id``."""

    def __iter__(self) -> Iterator[ClientSession]:
        return iter(list(self._by_connection.values()))

    def __len__(self) -> int:
        return len(self._by_connection)

    def only(self) -> ClientSession | None:
        """The one client connected, if there is exactly one (a stdio gateway's, a daemon
        session's)."""
        if len(self._by_connection) != 1:
            return None
        for session in self._by_connection.values():
            return session
        return None

    def session_for(self, ctx: ServerRequestContext[Any, Any]) -> ClientSession:
        """The client behind one request (or notification): registered on its first message
        (handshake era), or made for this request alone (2026-07-28 era)."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        sdk_session = ctx.session
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        connection = None if modern else server_connection_of(sdk_session)
        if connection is not None:
            known = self._by_connection.get(connection)
            if known is not None:
                known.sdk_session = sdk_session
                return known
        capabilities = sdk_session.client_capabilities
        params = sdk_session.client_params
        declared = (
            capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
            if capabilities is not None
            else {}
        )
        client_name = params.client_info.name if params is not None else named_in_meta(ctx.meta)
        if connection is None:
            return ClientSession("modern", ctx.protocol_version, sdk_session, declared, client_name)
        session = ClientSession("legacy", ctx.protocol_version, sdk_session, declared, client_name)
        self._by_connection[connection] = session
        if connection.session_id is not None:
            self._by_session_id[connection.session_id] = session
        connection.exit_stack.callback(self._forget, connection)
        logger.info("client %s connected (%s)", session.client_name or "(unnamed)", ctx.protocol_version)
        return session

    def by_session_id(self, session_id: str) -> ClientSession | None:
        """The registered client of the streamable HTTP session ``session_id``, if any."""
        return self._by_session_id.get(session_id)

    def _forget(self, connection: Connection) -> None:
        if connection.session_id is not None:
            self._by_session_id.pop(connection.session_id, None)
        session = self._by_connection.pop(connection, None)
        if session is not None:
            logger.info("client %s disconnected", session.client_name or "(unnamed)")

    async def notify_all(self, method: str) -> None:
        """Send the parameterless notification ``method`` to every registered client."""
        for session in self:
            await session.notify(method)
