"""The gateway: the whole fleet of one ``MCPManager`` seen as one MCP server.

``Gateway`` owns the manager's life (``async with Gateway(manager) as gateway``: discover,
connect behind the start-up gate, serve, close every backend within the fleet's deadline),
decides what is served and under which names (``gateway.catalog``, ``gateway.naming``), and
routes every request to the backend behind a served name. It speaks no protocol itself:
``gateway.server.build_server`` turns it into the SDK's lowlevel ``Server`` and
``gateway.stdio`` serves that on stdin/stdout; other transports (streamable HTTP) serve the
same ``Server``.

The served lists change when a backend connects, re-lists, or is given up: each change of
the fleet marks the gateway dirty, and one announcer task compares what would be served now
with what was served last and, for each list that differs, tells every client (the
``list_changed`` notifications of ``ClientSessions.notify_all``, and on the
``subscriptions/listen`` streams of 2026-07-28 clients through ``on_list_changed``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Self

import anyio

from mcpfleet.errors import ConfigError, MCPFleetError
from mcpfleet.gateway.catalog import ListKind, ServedCatalog, build_catalog, instructions_for
from mcpfleet.gateway.naming import NamingPolicy
from mcpfleet.gateway.sessions import ClientSessions
from mcpfleet.redaction import redact_text

if TYPE_CHECKING:
    from mcpfleet.config.model import DiscoveryResult
    from mcpfleet.fleet.events import ManagerEvent
    from mcpfleet.fleet.manager import MCPManager, StartupReport

logger = logging.getLogger(__name__)

ProgressRelay = Callable[[float, float | None, str | None], Awaitable[None]]
ListChangedListener = Callable[[ListKind], Awaitable[None]]

SERVER_NAME = "mcpfleet"
"""The gateway's own name in ``serverInfo``."""

_LIST_CHANGED_METHODS: dict[ListKind, str] = {
    "tools": "notifications/tools/list_changed",
    "resources": "notifications/resources/list_changed",
    "prompts": "notifications/prompts/list_changed",
}


class UnknownToolError(MCPFleetError):
    """A ``tools/call`` named a tool the gateway does not serve."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Unknown tool: {name}; list the tools again (tools/list) for the current names")
        self.name = name


class Gateway(anyio.AsyncContextManagerMixin):
    """``async with Gateway(manager) as gateway``: the fleet, connected and ready to be served."""

    def __init__(self, manager: MCPManager, *, naming: NamingPolicy | None = None) -> None:
        self.manager = manager
        self.naming = naming or NamingPolicy()
        self.sessions = ClientSessions()
        self.discovery: DiscoveryResult | None = None
        self.report: StartupReport | None = None
        self._catalog = ServedCatalog.empty()
        self._dirty = anyio.Event()
        self._list_changed_listeners: list[ListChangedListener] = []

    # -- lifetime -----------------------------------------------------------------------------------------

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        async with self.manager:
            discovery = self.discovery = self.manager.discover()
            report = await self.manager.connect_servers(discovery.configs, discovery.sources)
            report.complete_from(discovery)
            self.report = report
            self._catalog = self._build_catalog()
            if self._catalog.collisions:
                raise ConfigError(f"mcpfleet serve: {self._catalog.collisions[0].message()}")
            unsubscribe = self.manager.subscribe(self._on_fleet_event)
            try:
                async with anyio.create_task_group() as task_group:
                    task_group.start_soon(self._announce_changes, name="mcpfleet gateway announcer")
                    try:
                        yield self
                    finally:
                        task_group.cancel_scope.cancel()
            finally:
                unsubscribe()

    # -- what is served -------------------------------------------------------------------------------------

    @property
    def catalog(self) -> ServedCatalog:
        """What is served now: tools, resources, templates and prompts, with their names."""
        return self._catalog

    @property
    def instructions(self) -> str:
        """The gateway's ``instructions``: the servers it serves, and those it does not with the fix."""
        return instructions_for(self.manager, self.discovery, self.report)

    def on_list_changed(self, listener: ListChangedListener) -> Callable[[], None]:
        """Call ``listener(kind)`` when a served list changes; returns the function that stops it."""
        self._list_changed_listeners.append(listener)

        def stop() -> None:
            if listener in self._list_changed_listeners:
                self._list_changed_listeners.remove(listener)

        return stop

    def _build_catalog(self) -> ServedCatalog:
        return build_catalog(self.manager, self.naming)

    def _on_fleet_event(self, event: ManagerEvent) -> None:
        self._dirty.set()

    async def _announce_changes(self) -> None:
        """Recompute the served lists after each burst of fleet changes; announce those that differ."""
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            previous, current = self._catalog, self._build_catalog()
            self._catalog = current
            for kind in previous.changed_lists(current):
                logger.info("served %s changed; telling %d client(s)", kind, len(self.sessions))
                await self.sessions.notify_all(_LIST_CHANGED_METHODS[kind])
                for listener in list(self._list_changed_listeners):
                    try:
                        await listener(kind)
                    except Exception:
                        logger.exception("a list_changed listener failed")

    # -- requests -------------------------------------------------------------------------------------------

    async def call_tool(
        self, served_name: str, arguments: dict[str, Any], *, on_progress: ProgressRelay | None = None
    ) -> Any:
        """Call the tool behind ``served_name``: the backend's result unchanged, or an error result
        (``MCP error: …``) naming the server and the reason when the backend cannot answer.

        Raises ``UnknownToolError`` for a name the gateway never served (a JSON-RPC error).
        """
        target = self._catalog.tool_target(served_name)
        if target is None:
            raise UnknownToolError(served_name)
        server, tool = target
        try:
            return await self.manager.call_tool(server, tool, arguments, on_progress=on_progress)
        except MCPFleetError as error:
            return error_result(str(error))


def error_result(message: str) -> dict[str, Any]:
    """A ``tools/call`` result that reports a failure the model can read."""
    return {"content": [{"type": "text", "text": f"MCP error: {redact_text(message)}"}], "isError": True}
