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
``list_changed`` notifications of ``ClientSessions.notify_all``, and the listeners of
``on_list_changed``, which feed the ``subscriptions/listen`` streams of 2026-07-28 clients).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.abc

from mcpfleet.errors import ConfigError, MCPFleetError
from mcpfleet.gateway.catalog import ListKind, ServedCatalog, build_catalog, instructions_for
from mcpfleet.gateway.listings import RESOURCE_KINDS, ListingKind, Listings
from mcpfleet.gateway.naming import NamingPolicy
from mcpfleet.gateway.sessions import ClientSession, ClientSessions
from mcpfleet.redaction import redact_text

if TYPE_CHECKING:
    from mcpfleet.config.model import DiscoveryResult
    from mcpfleet.fleet.events import ManagerEvent
    from mcpfleet.fleet.manager import MCPManager, StartupReport

logger = logging.getLogger(__name__)

ProgressRelay = Callable[[float, float | None, str | None], Awaitable[None]]
LogRelay = Callable[[dict[str, Any]], Awaitable[None]]
"""Receives the params of a backend's ``notifications/message`` (its ``logger`` set to the server)."""
ListChangedListener = Callable[[ListKind], Awaitable[None]]
ResourceUpdatedListener = Callable[[str], Awaitable[None]]

SERVER_NAME = "mcpfleet"
"""The gateway's own name in ``serverInfo``."""

_LIST_CHANGED_METHODS: dict[ListKind, str] = {
    "tools": "notifications/tools/list_changed",
    "resources": "notifications/resources/list_changed",
    "prompts": "notifications/prompts/list_changed",
}
_RELISTED_ON: dict[str, tuple[ListingKind, ...]] = {
    "resources_changed": RESOURCE_KINDS,
    "prompts_changed": ("prompts",),
}


class UnknownNameError(MCPFleetError):
    """A request named a tool, prompt or resource that the gateway does not serve."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"Unknown {kind}: {name}; list them again for the current names")
        self.kind = kind
        self.name = name


@dataclass(eq=False)
class InFlight:
    """One request the gateway is forwarding to a backend, and the client that made it."""

    server: str
    client: ClientSession | None
    on_log: LogRelay | None = None
    """Where the server's log messages go while the request runs (a 2026-07-28 client, whose
    logs ride the request that opted in to them)."""


@dataclass(eq=False)
class _Subscription:
    """One backend resource that clients subscribed to, through one served URI."""

    stop: Callable[[], None]
    clients: weakref.WeakSet[ClientSession] = field(default_factory=weakref.WeakSet)


class Gateway(anyio.AsyncContextManagerMixin):
    """``async with Gateway(manager) as gateway``: the fleet, connected and ready to be served."""

    def __init__(self, manager: MCPManager, *, naming: NamingPolicy | None = None) -> None:
        self.manager = manager
        self.naming = naming or NamingPolicy()
        self.sessions = ClientSessions()
        self.discovery: DiscoveryResult | None = None
        self.report: StartupReport | None = None
        self._listings = Listings(manager, self._mark_dirty)
        self._catalog = ServedCatalog(policy=self.naming)
        self._dirty = anyio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._list_changed_listeners: list[ListChangedListener] = []
        self._resource_updated_listeners: list[ResourceUpdatedListener] = []
        self._subscriptions: dict[str, _Subscription] = {}
        self._in_flight: list[InFlight] = []
        self._subscription_lock = anyio.Lock()

    # -- lifetime -----------------------------------------------------------------------------------------

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        async with self.manager, anyio.create_task_group() as task_group:
            self._task_group = task_group
            stop_events = self.manager.subscribe(self._on_fleet_event)
            stop_logs = self.manager.subscribe_logs(self._on_server_log)
            try:
                discovery = self.discovery = self.manager.discover()
                report = await self.manager.connect_servers(discovery.configs, discovery.sources)
                report.complete_from(discovery)
                self.report = report
                for server in self.manager.get_all_server_names():
                    self._listings.load_cached(server)
                    if self.manager.get_connection_status(server) == "connected":
                        task_group.start_soon(self._listings.refresh, server)
                self._catalog = self._build_catalog()
                if self._catalog.collisions:
                    raise ConfigError(f"mcpfleet serve: {self._catalog.collisions[0].message()}")
                task_group.start_soon(self._announce_changes, name="mcpfleet gateway announcer")
                yield self
            finally:
                stop_events()
                stop_logs()
                for subscription in self._subscriptions.values():
                    subscription.stop()
                self._subscriptions.clear()
                self._task_group = None
                task_group.cancel_scope.cancel()

    # -- what is served -------------------------------------------------------------------------------------

    @property
    def catalog(self) -> ServedCatalog:
        """What is served now: tools, resources, templates and prompts, with their names."""
        return self._catalog

    @property
    def instructions(self) -> str:
        """The gateway's ``instructions``: the servers it serves, and those it does not with the fix."""
        return instructions_for(self.manager, self.report, self._catalog)

    def on_list_changed(self, listener: ListChangedListener) -> Callable[[], None]:
        """Call ``listener(kind)`` when a served list changes; returns the function that stops it."""
        return _add_listener(self._list_changed_listeners, listener)

    def on_resource_updated(self, listener: ResourceUpdatedListener) -> Callable[[], None]:
        """Call ``listener(served_uri)`` when a subscribed resource changes; returns the stopper."""
        return _add_listener(self._resource_updated_listeners, listener)

    def _build_catalog(self) -> ServedCatalog:
        return build_catalog(self.manager, self.naming, self._listings.snapshot())

    def _mark_dirty(self) -> None:
        self._dirty.set()

    def _on_fleet_event(self, event: ManagerEvent) -> None:
        task_group = self._task_group
        if task_group is not None:
            if event.kind == "connected":
                task_group.start_soon(self._listings.refresh, event.server)
            elif event.kind in _RELISTED_ON:
                task_group.start_soon(self._listings.refresh, event.server, _RELISTED_ON[event.kind])
            elif event.kind == "disconnected" and self.manager.get_server_config(event.server) is None:
                self._listings.forget(event.server)
        self._mark_dirty()

    async def _announce_changes(self) -> None:
        """Recompute the served lists after each burst of fleet changes; announce those that differ."""
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            previous, current = self._catalog, self._build_catalog()
            self._catalog = current
            for collision in current.collisions:
                if collision not in previous.collisions:
                    logger.warning("mcpfleet serve: %s (the first one is served)", collision.message())
            for kind in previous.changed_lists(current):
                logger.info("served %s changed; telling %d client(s)", kind, len(self.sessions))
                await self.sessions.notify_all(_LIST_CHANGED_METHODS[kind])
                await _call_each(self._list_changed_listeners, kind)

    # -- requests -------------------------------------------------------------------------------------------

    def in_flight(self, server: str) -> list[InFlight]:
        """The requests being forwarded to ``server`` now, oldest first: who a backend's own
        request (sampling, elicitation, roots) was caused by."""
        return [request for request in self._in_flight if request.server == server]

    @contextmanager
    def _forwarding(
        self, server: str, client: ClientSession | None, on_log: LogRelay | None
    ) -> Iterator[None]:
        request = InFlight(server, client, on_log)
        self._in_flight.append(request)
        try:
            yield
        finally:
            self._in_flight.remove(request)

    async def call_tool(
        self,
        served_name: str,
        arguments: dict[str, Any],
        *,
        on_progress: ProgressRelay | None = None,
        client: ClientSession | None = None,
        on_log: LogRelay | None = None,
    ) -> Any:
        """Call the tool behind ``served_name``: the backend's result unchanged, or an error result
        (``MCP error: …``) naming the server and the reason when the backend cannot answer.

        ``client`` is who asked (see ``in_flight``); ``on_log`` receives the backend's log
        messages while the call runs. Raises ``UnknownNameError`` for a name the gateway does
        not know (a JSON-RPC error).
        """
        target = self._catalog.tool_target(served_name)
        if target is None:
            raise UnknownNameError("tool", served_name)
        server, tool = target
        with self._forwarding(server, client, on_log):
            try:
                return await self.manager.call_tool(server, tool, arguments, on_progress=on_progress)
            except MCPFleetError as error:
                return error_result(str(error))

    async def read_resource(self, uri: str) -> dict[str, Any]:
        """``resources/read`` on the backend behind ``uri``; the contents carry served URIs."""
        server, backend_uri = self._resource_target(uri)
        result = await self.manager.read_resource(server, backend_uri)
        contents = result.get("contents")
        if isinstance(contents, list):
            result["contents"] = [
                {**item, "uri": self._catalog.served_uri(server, item["uri"])}
                if isinstance(item, dict) and isinstance(item.get("uri"), str)
                else item
                for item in contents
            ]
        return result

    async def get_prompt(self, served_name: str, arguments: dict[str, str] | None) -> dict[str, Any]:
        target = self._catalog.prompt_target(served_name)
        if target is None:
            raise UnknownNameError("prompt", served_name)
        server, prompt = target
        return await self.manager.get_prompt(server, prompt, arguments)

    async def complete(
        self, ref: dict[str, Any], argument: dict[str, str], context_arguments: dict[str, str] | None
    ) -> dict[str, Any]:
        """``completion/complete`` for a served prompt or resource template, on its backend."""
        if ref.get("type") == "ref/prompt":
            target = self._catalog.prompt_target(str(ref.get("name")))
            if target is None:
                raise UnknownNameError("prompt", str(ref.get("name")))
            server, name = target
            backend_ref = {**ref, "name": name}
        else:
            server, uri = self._resource_target(str(ref.get("uri")))
            backend_ref = {**ref, "uri": uri}
        return await self.manager.complete(server, backend_ref, argument, context_arguments)

    async def subscribe_resource(self, client: ClientSession, uri: str) -> None:
        """Tell ``client`` (and 2026-07-28 listen streams) when the resource behind ``uri`` changes."""
        server, backend_uri = self._resource_target(uri)
        async with self._subscription_lock:
            subscription = self._subscriptions.get(uri)
            if subscription is None:

                async def relay(_server: str, _uri: str) -> None:
                    await self._resource_updated(uri)

                stop = await self.manager.subscribe_resource(server, backend_uri, relay)
                subscription = self._subscriptions[uri] = _Subscription(stop)
            subscription.clients.add(client)

    async def unsubscribe_resource(self, client: ClientSession, uri: str) -> None:
        async with self._subscription_lock:
            subscription = self._subscriptions.get(uri)
            if subscription is None:
                return
            subscription.clients.discard(client)
            if not subscription.clients:
                del self._subscriptions[uri]
                subscription.stop()

    async def _resource_updated(self, uri: str) -> None:
        subscription = self._subscriptions.get(uri)
        for client in list(subscription.clients) if subscription is not None else ():
            if client.registered:
                await client.notify("notifications/resources/updated", {"uri": uri})
        await _call_each(self._resource_updated_listeners, uri)

    def _resource_target(self, uri: str) -> tuple[str, str]:
        target = self._catalog.resource_target(uri)
        if target is None:
            raise UnknownNameError("resource", uri)
        return target

    # -- backend logs ---------------------------------------------------------------------------------------

    def _on_server_log(self, server: str, params: dict[str, Any]) -> Awaitable[None] | None:
        """Relay a backend's ``notifications/message`` to every client, with the server as logger.

        Who receives it is decided now, when the message arrives, and the sending runs after:
        a log the backend wrote just before answering a call still reaches that call's client,
        even if the answer overtakes the sending.
        """
        level = params.get("level")
        if not isinstance(level, str):
            return None
        relayed = {**params, "logger": server}
        sessions = [client for client in self.sessions if client.wants_log(level)]
        relays = [request.on_log for request in self.in_flight(server) if request.on_log is not None]
        if not sessions and not relays:
            return None

        async def send() -> None:
            for client in sessions:
                await client.notify("notifications/message", relayed)
            for relay in relays:
                await relay(relayed)

        return send()


def error_result(message: str) -> dict[str, Any]:
    """A ``tools/call`` result that reports a failure the model can read."""
    return {"content": [{"type": "text", "text": f"MCP error: {redact_text(message)}"}], "isError": True}


def _add_listener(listeners: list[Any], listener: Any) -> Callable[[], None]:
    listeners.append(listener)

    def stop() -> None:
        if listener in listeners:
            listeners.remove(listener)

    return stop


async def _call_each(listeners: list[Callable[[Any], Awaitable[None]]], argument: Any) -> None:
    for listener in list(listeners):
        try:
            await listener(argument)
        except Exception:
            logger.exception("a gateway listener failed")
