"""What servers announce: catalog changes and resource updates.

``tools/list_changed`` re-lists the server and swaps its slice in one step, debounced and
paced: at most one re-list in flight plus one trailing pass, starting at least
``list_changed_min_interval_s`` apart, so a server that floods notifications costs one
``tools/list`` per interval and is reported once; each re-list ends in one ``tools_changed``
marked ``announced``. Resource and prompt list changes become ``announced`` events;
``resources/updated`` reaches the listeners of ``subscribe_resource``, and every subscription
is sent again on each new connection of its server. A 2026-07-28 server announces its list
changes on a ``subscriptions/listen`` stream, which its connection opens (``client.connection``)
and feeds to the same handler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

from mcpfleet.contract import notifications
from mcpfleet.errors import MCPFleetError
from mcpfleet.fleet.registry import Attempt, ServerRegistry, ServerSlot, ToolRefresh
from mcpfleet.fleet.settings import FleetSettings
from mcpfleet.fleet.startup import remember_tools
from mcpfleet.fleet.tool_list import ToolSlice, filter_tools

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection

logger = logging.getLogger(__name__)

LIST_CHANGED_FLOOD_WARNING = 100
"""Notifications folded into one re-list beyond which the server is reported as flooding."""

LIST_CHANGED_METHODS = (
    notifications.TOOLS_LIST_CHANGED,
    notifications.RESOURCES_LIST_CHANGED,
    notifications.PROMPTS_LIST_CHANGED,
)
ResourceListener = Callable[[str, str], Awaitable[None] | None]
"""Called with ``(server, uri)`` when a subscribed resource changes."""
LogListener = Callable[[str, dict[str, Any]], Awaitable[None] | None]
"""Called with ``(server, params)`` for each ``notifications/message`` a server sends."""


class Notifications:
    """Turns each server's notifications into re-lists, events and resource updates."""

    def __init__(self, registry: ServerRegistry, settings: FleetSettings) -> None:
        self._registry = registry
        self._settings = settings
        self._resource_listeners: dict[tuple[str, str], list[ResourceListener]] = {}
        self._log_listeners: list[LogListener] = []

    def handler_for(self, attempt: Attempt) -> Callable[[str, dict[str, Any] | None], None]:
        """The notification callback of the connection ``attempt`` opens."""
        slot = attempt.slot
        registry = self._registry

        def handle(method: str, params: dict[str, Any] | None) -> None:
            # A connection of a retired server no longer speaks for anyone.
            if slot.is_retired() or not registry.open:
                return
            if method in LIST_CHANGED_METHODS:
                self._list_changed(slot, method)
            elif method == notifications.RESOURCE_UPDATED:
                uri = (params or {}).get("uri")
                if isinstance(uri, str):
                    self._deliver_resource_update(slot.name, uri)
            elif method == notifications.LOG_MESSAGE and params is not None:
                for listener in list(self._log_listeners):
                    registry.events.call(listener, slot.name, params, what=f"log message of {slot.name}")
            else:
                logger.debug("notification %s from %s", method, slot.name)

        return handle

    def heard_elsewhere(self, name: str, method: str) -> bool:
        """Act on ``method`` (one of ``LIST_CHANGED_METHODS``) as if server ``name`` had sent it
        here; ``False`` when no such server runs. Another copy of the server announced it (a
        team gateway's other replica, which runs its own): its lists are read again here."""
        registry = self._registry
        if method not in LIST_CHANGED_METHODS or name not in registry or not registry.open:
            return False
        slot = registry[name]
        if slot.is_retired() or slot.connection is None:
            return False
        self._list_changed(slot, method)
        return True

    def _list_changed(self, slot: ServerSlot, method: str) -> None:
        if method == notifications.TOOLS_LIST_CHANGED:
            self._schedule_refresh(slot)
        elif method == notifications.RESOURCES_LIST_CHANGED:
            self._registry.emit("resources_changed", slot.name, announced=True)
        else:
            self._registry.emit("prompts_changed", slot.name, announced=True)

    # -- tools/list_changed ------------------------------------------------------------

    def _schedule_refresh(self, slot: ServerSlot) -> None:
        refresh = slot.refresh
        if refresh is not None:
            refresh.dirty = True  # the running refresh lists once more after its current pass
            refresh.folded += 1
            return
        refresh = slot.refresh = ToolRefresh()
        self._registry.task_group.start_soon(
            self._refresh, slot, refresh, name=f"mcpfleet re-list {slot.name}"
        )

    async def _refresh(self, slot: ServerSlot, refresh: ToolRefresh) -> None:
        """Re-list one server's tools after ``list_changed`` and swap its slice in one step."""
        settings = self._settings
        try:
            while refresh.dirty:
                await anyio.sleep(settings.list_changed_debounce_ms / 1000)
                # Paced, not debounced until quiet: a server that never stops announcing changes
                # is still re-listed (never starved), once per interval (never in a hot loop).
                pacing = slot.pacing
                if pacing.last_start is not None:
                    next_start = pacing.last_start + settings.list_changed_min_interval_s
                    await anyio.sleep(max(0.0, next_start - time.monotonic()))
                self._report_flood(slot, refresh.folded)
                refresh.dirty = False
                refresh.folded = 0
                # A notification sent during the first tools/list: that answer must land first.
                loading = slot.attempt
                if loading is not None and loading.listing:
                    await loading.done.wait()
                connection = slot.connection
                if connection is None or connection.ended or slot.is_retired():
                    return  # a reconnection lists the tools anyway
                listed_at = time.time()
                pacing.last_start = time.monotonic()
                try:
                    definitions = filter_tools(await connection.list_tools(), slot.config)
                except MCPFleetError as error:
                    logger.warning("Re-listing the tools of MCP server %s failed: %s", slot.name, error)
                    return
                if slot.connection is not connection or slot.is_retired():
                    return  # replaced or removed meanwhile: this answer is about another server
                previous = slot.tools
                slot.tools = ToolSlice(definitions, deferred=False)
                remember_tools(self._registry.cache, slot, connection, definitions, listed_at)
                if previous is None or previous.deferred or previous.definitions != definitions:
                    self._registry.rebuild_tools()
                # Even when the tools came back the same: the server announced a change, and a
                # consumer that passes announcements on must see each one (``announced``).
                self._registry.emit("tools_changed", slot.name, announced=True)
        finally:
            if slot.refresh is refresh:
                slot.refresh = None

    def _report_flood(self, slot: ServerSlot, folded: int) -> None:
        """Say once that a server announces changes far faster than it can usefully be re-listed."""
        pacing = slot.pacing
        if pacing.flood_reported or folded < LIST_CHANGED_FLOOD_WARNING:
            return
        pacing.flood_reported = True
        logger.warning(
            "MCP server %s sent %d tools/list_changed notifications between two re-lists; "
            "its tools are re-listed at most once every %g s",
            slot.name,
            folded,
            self._settings.list_changed_min_interval_s,
        )

    # -- log messages ------------------------------------------------------------------

    def subscribe_logs(self, listener: LogListener) -> Callable[[], None]:
        """Call ``listener(server, params)`` on every server's ``notifications/message``."""
        self._log_listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._log_listeners:
                self._log_listeners.remove(listener)

        return unsubscribe

    # -- resource subscriptions --------------------------------------------------------

    async def subscribe_resource(
        self, server: str, uri: str, listener: ResourceListener
    ) -> Callable[[], None]:
        """Call ``listener(server, uri)`` on each ``notifications/resources/updated`` for ``uri``.

        Sends ``resources/subscribe`` when the server supports it (and again after every
        reconnection). Returns the function that unsubscribes.
        """
        key = (server, uri)
        listeners = self._resource_listeners.setdefault(key, [])
        listeners.append(listener)
        connection = self._live_connection(server)
        if len(listeners) == 1 and connection is not None:
            await _send_subscription(connection, uri, subscribe=True)

        def unsubscribe() -> None:
            current = self._resource_listeners.get(key)
            if current is None or listener not in current:
                return
            current.remove(listener)
            if current:
                return
            del self._resource_listeners[key]
            live = self._live_connection(server)
            if live is not None and self._registry.open:
                self._registry.task_group.start_soon(_send_subscription, live, uri, False)

        return unsubscribe

    def resubscribe(self, slot: ServerSlot, connection: ServerConnection) -> None:
        """Send every subscription of ``slot``'s server on its new connection."""
        for server, uri in list(self._resource_listeners):
            if server == slot.name:
                self._registry.task_group.start_soon(_send_subscription, connection, uri, True)

    def _deliver_resource_update(self, name: str, uri: str) -> None:
        for listener in list(self._resource_listeners.get((name, uri), ())):
            self._registry.events.call(listener, name, uri, what=f"resource update {name} {uri}")

    def _live_connection(self, server: str) -> ServerConnection | None:
        slot = self._registry.get(server)
        return slot.connection if slot is not None and slot.live else None


async def _send_subscription(connection: ServerConnection, uri: str, subscribe: bool) -> None:
    resources = connection.capabilities.get("resources")
    if not (isinstance(resources, dict) and resources.get("subscribe")):
        return
    try:
        if subscribe:
            await connection.subscribe_resource(uri)
        else:
            await connection.unsubscribe_resource(uri)
    except MCPFleetError as error:
        logger.warning("MCP server %s: resource subscription for %s failed: %s", connection.name, uri, error)
