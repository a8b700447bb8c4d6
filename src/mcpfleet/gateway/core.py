"""The gateway: the whole fleet it is given (``served_fleet.ServedFleet``) seen as one MCP server.

``Gateway`` owns the fleet's life (``async with Gateway(fleet) as gateway``: discover,
connect behind the start-up gate, serve, close every backend within the fleet's deadline),
decides what is served and under which names (``gateway.served_catalog``, ``gateway.naming``), and
routes every request to the backend behind a served name. It speaks no protocol itself:
``gateway.handlers.build_server`` turns it into the SDK's lowlevel ``Server`` and
``gateway.stdio`` serves that on stdin/stdout; other transports (streamable HTTP) serve the
same ``Server``.

The served lists change when a backend connects, re-lists, or is given up: each change of
the fleet marks the gateway dirty, and one announcer task compares what would be served now
with what was served last and, for each list that differs or that a backend announced a change
of (its own ``list_changed``, even when the re-listed list is the same), tells every client (the
``list_changed`` notifications of ``ClientSessions.notify_all``, and the listeners of
``on_list_changed``, which feed the ``subscriptions/listen`` streams of 2026-07-28 clients).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import replace
from functools import wraps
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Self

import anyio
import anyio.abc

from mcpfleet.contract.defaults import STARTUP_TIMEOUT_MS
from mcpfleet.errors import ConfigError, MCPFleetError
from mcpfleet.fleet.pinning import WithheldTool, withheld_message
from mcpfleet.gateway.budget import ToolBudget
from mcpfleet.gateway.forward import Forward, InFlight, ProgressRelay
from mcpfleet.gateway.guard import Asker, GuardRefusal, RequestGuard
from mcpfleet.gateway.listings import RESOURCE_KINDS, ListingKind, Listings
from mcpfleet.gateway.naming import NamingPolicy
from mcpfleet.gateway.rejections import BackendRejection, backend_rejection
from mcpfleet.gateway.relay import Relay
from mcpfleet.gateway.resource_subscriptions import ResourceSubscriptions, ResourceUpdatedListener
from mcpfleet.gateway.served_catalog import ListKind, ServedCatalog, build_catalog, instructions_for
from mcpfleet.gateway.server_logs import server_log_delivery
from mcpfleet.gateway.sessions import ClientSession, ClientSessions
from mcpfleet.gateway.views import Views
from mcpfleet.redaction import redact_text
from mcpfleet.telemetry import active

if TYPE_CHECKING:
    from mcpfleet.config.model import DiscoveryResult
    from mcpfleet.fleet.events import ManagerEvent
    from mcpfleet.fleet.startup import StartupReport
    from mcpfleet.gateway.served_fleet import ServedFleet

logger = logging.getLogger(__name__)

ListChangedListener = Callable[[ListKind], Awaitable[None]]
_P = ParamSpec("_P")

SERVER_NAME = "mcpfleet"
"""The gateway's own name in ``serverInfo``."""

LOG_FLUSH_TIMEOUT_S = 5.0
"""At most this long a call's answer waits for the backend's log messages of that call to go
out before it (they are sent by then unless the client is stuck)."""
UNKNOWN_NAME_WAIT_S = 10.0
"""How long a request for a name the gateway does not serve (yet) waits while backends are still
starting or being listed: a client may ask for a name it knows from an earlier session before
the backend that owns it has been listed in this one. Past this, or once every backend has
settled, the name is unknown (a JSON-RPC error)."""


def first_list_cap_ms(startup_timeout_ms: int) -> int | None:
    """How long the gateway's first list may wait for servers with nothing cached: no cap but
    each server's handshake timeout (``None``) at the default gate, or when the gate already
    waits for every server (0); a ``--startup-timeout`` the user chose caps it."""
    # Left at the default, the first list's wait has no cap of its own.
    if startup_timeout_ms in (0, STARTUP_TIMEOUT_MS):
        return None
    return startup_timeout_ms


_RELISTED_ON: dict[str, tuple[ListingKind, ...]] = {
    "resources_changed": RESOURCE_KINDS,
    "prompts_changed": ("prompts",),
}
_SERVED_LIST_OF: dict[str, ListKind] = {
    "tools_changed": "tools",
    "resources_changed": "resources",
    "prompts_changed": "prompts",
}


class UnknownNameError(MCPFleetError):
    """A request named a tool, prompt or resource that the gateway does not serve."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f"Unknown {kind}: {name}; list them again for the current names")
        self.kind = kind
        self.name = name


def _observed(
    call_tool: Callable[Concatenate[Gateway, Forward, _P], Awaitable[Any]],
) -> Callable[Concatenate[Gateway, Forward, _P], Awaitable[Any]]:
    """``Gateway.call_tool`` recorded by the process's telemetry, when it has any
    (``mcpfleet.telemetry``: the gateway's span of the call, its count, errors and latency)."""

    @wraps(call_tool)
    async def observed(gateway: Gateway, forward: Forward, /, *args: _P.args, **kwargs: _P.kwargs) -> Any:
        telemetry = active()
        if telemetry is None or forward.server is None:
            return await call_tool(gateway, forward, *args, **kwargs)
        with telemetry.gateway_call(forward.server, forward.backend_name) as outcome:
            result = await call_tool(gateway, forward, *args, **kwargs)
            if is_error_result(result):
                outcome.error = "tool_error"
            return result

    return observed


class Gateway(anyio.AsyncContextManagerMixin):
    """``async with Gateway(fleet) as gateway``: the fleet, connected and ready to be served.

    ``fleet`` is an ``MCPManager`` (this process's own fleet) or anything else with the
    surface of ``gateway.served_fleet.ServedFleet`` (the daemon's view of its shared fleet)."""

    def __init__(
        self,
        fleet: ServedFleet,
        *,
        naming: NamingPolicy | None = None,
        relay: Relay | None = None,
        budget: ToolBudget | None = None,
        first_list_wait_ms: int | None = None,
        guard: RequestGuard | None = None,
    ) -> None:
        """``relay`` must be the fleet's ``server_requests`` for backends' questions to reach
        the clients (see ``gateway.relay``); without one, the fleet's own handler answers them.
        The gateway serves the relay's client sessions and shares its registry of requests in
        flight. ``gateway.assembly.open_gateway`` builds all of it.
        ``budget`` decides which tools each client is served (see ``gateway.budget``).
        ``first_list_wait_ms`` caps how long the first lists wait for servers still starting
        with nothing cached (``None``: each server's own handshake timeout bounds it; see
        ``first_lists_ready``). ``guard`` decides what each request may see and do
        (``gateway.guard``; none: everything, the local gateway)."""
        self.fleet = fleet
        self.naming = naming or NamingPolicy()
        self.budget = budget if budget is not None else ToolBudget()
        self.relay = relay if relay is not None else Relay(ClientSessions())
        self.sessions = self.relay.sessions
        self.discovery: DiscoveryResult | None = None
        self.report: StartupReport | None = None
        self._listings = Listings(fleet, self._mark_dirty)
        self._catalog = ServedCatalog(policy=self.naming)
        self._dirty = anyio.Event()
        self._announced: set[ListKind] = set()
        """Lists a backend announced a change of (its ``list_changed``), told to every client at
        the next rebuild even if the served list came out the same (issue 14)."""
        self._rebuilt = anyio.Event()
        self._task_group: anyio.abc.TaskGroup | None = None
        self._list_changed_listeners: list[ListChangedListener] = []
        self._resource_updated_listeners: list[ResourceUpdatedListener] = []
        self._first_list_wait_ms = first_list_wait_ms
        self._first_lists_ready = False
        self.views = Views(guard, current=lambda: self._catalog)
        self.subscriptions = ResourceSubscriptions(
            fleet,
            self.views,
            target=self._resource_target,
            passing_rejections=self._passing_rejections,
            on_updated=lambda uri: _call_each(self._resource_updated_listeners, uri),
        )

    # -- lifetime -----------------------------------------------------------------------------------------

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        async with self.fleet, anyio.create_task_group() as task_group:
            self._task_group = task_group
            stop_events = self.fleet.subscribe(self._on_fleet_event)
            stop_logs = self.fleet.subscribe_logs(self._on_server_log)
            stop_views = self.views.follow(self._mark_dirty)
            try:
                discovery = self.discovery = self.fleet.discover()
                report = await self.fleet.connect_servers(discovery.configs, discovery.sources)
                report.complete_from(discovery)
                self.report = report
                for server in self.fleet.get_all_server_names():
                    self._listings.load_cached(server)
                    if self.fleet.get_connection_status(server) == "connected":
                        task_group.start_soon(self._listings.refresh, server)
                self._catalog = self._build_catalog()
                if self._catalog.collisions:
                    raise ConfigError(f"mcpfleet serve: {self._catalog.collisions[0].message()}")
                task_group.start_soon(self._announce_changes, name="mcpfleet gateway announcer")
                yield self
            finally:
                stop_events()
                stop_logs()
                stop_views()
                self.subscriptions.close()
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
        return instructions_for(self.fleet, self.report, self._catalog)

    def on_list_changed(self, listener: ListChangedListener) -> Callable[[], None]:
        """Call ``listener(kind)`` when a served list changes; returns the function that stops it."""
        return _add_listener(self._list_changed_listeners, listener)

    def on_resource_updated(self, listener: ResourceUpdatedListener) -> Callable[[], None]:
        """Call ``listener(served_uri)`` when a subscribed resource changes; returns the stopper."""
        return _add_listener(self._resource_updated_listeners, listener)

    def tell_backends_roots_changed(self) -> None:
        """Tell every backend the clients' roots changed (they ask again, through the relay).

        In the background: a backend that asks at once is answered by the very client whose
        notification caused this, whose messages must not wait behind its handler."""
        fleet = self.fleet
        fleet.task_group.start_soon(fleet.notify_roots_changed, name="mcpfleet roots changed")

    def _build_catalog(self) -> ServedCatalog:
        return self.budget.restrict(build_catalog(self.fleet, self.naming, self._listings.snapshot()))

    def _mark_dirty(self) -> None:
        self._dirty.set()

    def _on_fleet_event(self, event: ManagerEvent) -> None:
        task_group = self._task_group
        if task_group is not None:
            if event.kind == "connected":
                task_group.start_soon(self._listings.refresh, event.server)
            elif event.kind in _RELISTED_ON:
                task_group.start_soon(self._relist, event, _RELISTED_ON[event.kind])
                return  # dirty once the re-list has landed
            elif event.kind == "disconnected" and self.fleet.get_server_config(event.server) is None:
                self._listings.forget(event.server)
        if event.announced and event.kind in _SERVED_LIST_OF:
            # The fleet has re-listed the tools already: the announcement goes out with this rebuild.
            self._announced.add(_SERVED_LIST_OF[event.kind])
        self._mark_dirty()

    async def _relist(self, event: ManagerEvent, kinds: tuple[ListingKind, ...]) -> None:
        """Re-list a backend's resources or prompts, then announce them if the backend did."""
        await self._listings.refresh(event.server, kinds)
        if event.announced:
            self._announced.add(_SERVED_LIST_OF[event.kind])
        self._mark_dirty()

    async def _announce_changes(self) -> None:
        """Recompute the served lists after each burst of fleet changes; announce those that differ."""
        while True:
            await self._dirty.wait()
            self._dirty = anyio.Event()
            previous, current = self._catalog, self._build_catalog()
            self._catalog = current
            self._rebuilt.set()
            self._rebuilt = anyio.Event()
            for collision in current.collisions:
                if collision not in previous.collisions:
                    logger.warning("mcpfleet serve: %s (the first one is served)", collision.message())
            changed = previous.changed_lists(current)
            announced, self._announced = self._announced, set()
            await self.views.announce(current, changed, announced, self.sessions, self._tell_listeners)

    async def _tell_listeners(self, kind: ListKind) -> None:
        await _call_each(self._list_changed_listeners, kind)

    # -- requests -------------------------------------------------------------------------------------------

    async def find_target(self, kind: ListKind, name: str) -> tuple[str, str] | None:
        """``(server, backend name or URI)`` behind a served tool, prompt or resource name,
        waiting (at most ``UNKNOWN_NAME_WAIT_S``) while the fleet has not settled: a backend
        still connecting, a listing under way, or a change not yet folded into the catalog."""

        def lookup() -> tuple[str, str] | None:
            catalog = self._catalog
            if kind == "tools":
                return catalog.tool_target(name)
            if kind == "prompts":
                return catalog.prompt_target(name)
            return catalog.resource_target(name)

        with anyio.move_on_after(UNKNOWN_NAME_WAIT_S):
            while lookup() is None and self._unsettled():
                await self._rebuilt.wait()
        return lookup()

    async def first_lists_ready(self) -> None:
        """Return once the gateway's lists may be served; only its first ones wait.

        A server still starting with nothing cached would be missing from a list served now,
        and a one-shot client (or a host that never lists again) would never see it: so the
        first lists wait until every such server has connected and been listed, or failed,
        each within its own handshake timeout (at most ``first_list_wait_ms`` in all).
        Servers with cached tools are served from the cache meanwhile, as ever.
        """
        if self._first_lists_ready:
            return
        cap = self._first_list_wait_ms
        with anyio.move_on_after(cap / 1000 if cap is not None else None):
            while self._starting_uncached() or self._dirty.is_set() or self._listings.refreshing > 0:
                await self._rebuilt.wait()
        self._first_lists_ready = True

    def _starting_uncached(self) -> bool:
        """Whether a server is still starting with no tools served for it (none cached)."""
        fleet = self.fleet
        starting = {
            server
            for server in fleet.get_all_server_names()
            if fleet.get_connection_status(server) == "connecting"
        }
        if not starting:
            return False
        with_tools = {tool.server_name for tool in fleet.get_tools()}
        return bool(starting - with_tools)

    def _unsettled(self) -> bool:
        return (
            self._dirty.is_set()
            or self._listings.refreshing > 0
            or any(
                self.fleet.get_connection_status(server) == "connecting"
                for server in self.fleet.get_all_server_names()
            )
        )

    async def resolve(
        self, client: ClientSession, kind: ListKind, served_name: str, asker: Asker | None = None
    ) -> Forward:
        """Where a request for ``served_name`` (a prompt's name, a resource's URI) goes: resolved
        once, for the relay and the backend call alike (``Forward``). ``GuardRefusal`` when the
        guard refuses ``asker`` the request."""
        target = await self.find_target(kind, served_name)
        if target is None:
            return Forward(self.fleet, client, kind, served_name)
        server, backend_name = target
        forward = Forward(
            self.fleet, client, kind, served_name, server, backend_name, self.fleet.get_connection(server)
        )
        return await self.views.permitted(forward, asker)

    async def resolve_call(
        self, client: ClientSession, name: str, arguments: dict[str, Any], asker: Asker | None = None
    ) -> Forward:
        """Where a ``tools/call`` goes: the tool budget decides over what ``asker`` sees (a
        served tool, ``call_tool``'s inner one, or its own answer), then the tool is resolved,
        once, and the guard asked (its refusal is the call's answer)."""
        route = await self.budget.route_call(
            self.views.catalog_for(self._catalog, asker.viewer) if asker is not None else self._catalog,
            client.client_name,
            name,
            arguments,
            find_target=self.find_call_target,
        )
        if route.answer is not None:
            return Forward(self.fleet, client, "tools", name, answer=route.answer)
        target = route.target if route.target is not None else await self.find_call_target(route.name)
        arguments = dict(route.arguments or {})
        if target is None:
            return Forward(self.fleet, client, "tools", route.name, arguments=arguments)
        server, tool = target
        withheld = next(
            (held for held in self.fleet.withheld_tools() if (held.server, held.tool) == target), None
        )
        if withheld is not None:
            # Pinning keeps it out of every listing; the model learns why its call is refused.
            answer = error_result(withheld_message(withheld))
            return Forward(self.fleet, client, "tools", route.name, answer=answer)
        connection = self.fleet.get_connection(server)
        forward = Forward(self.fleet, client, "tools", route.name, server, tool, connection, arguments)
        try:
            return await self.views.permitted(forward, asker)
        except GuardRefusal as refusal:
            return replace(forward, answer=error_result(str(refusal)))

    @_observed
    async def call_tool(
        self, forward: Forward, flight: InFlight | None, *, on_progress: ProgressRelay | None = None
    ) -> Any:
        """Call the tool ``forward`` resolved: the backend's result unchanged, or an error result
        (``MCP error: …``) naming the server and the reason when the backend cannot answer.

        ``flight`` is the call in flight (the relay's), whose client gets the backend's log
        messages of the call before its answer. Raises ``UnknownNameError`` for a name the
        gateway does not know (a JSON-RPC error).
        """
        server = forward.server
        if server is None:
            raise UnknownNameError("tool", forward.served_name)
        try:
            result = await self.views.send(
                forward,
                lambda backend: backend.call_tool(
                    server, forward.backend_name, dict(forward.arguments), on_progress=on_progress
                ),
                failed=is_error_result,
            )
        except MCPFleetError as error:
            result = call_failure(self, server, error, flight)
        if flight is not None:
            flight.failed = is_error_result(result)
            # The backend's logs of this call arrived before its answer: they go out first.
            with anyio.move_on_after(LOG_FLUSH_TIMEOUT_S):
                for delivered in flight.log_deliveries:
                    await delivered.wait()
        return result

    async def find_call_target(self, served_name: str) -> tuple[str, str] | None:
        """``find_target`` for a ``tools/call``: a withheld tool is found too, so that calling
        it (``call_tool`` of the tool budget included) answers why it is withheld, not that no
        such tool exists."""
        target = await self.find_target("tools", served_name)
        withheld = self._withheld_named(served_name) if target is None else None
        return (withheld.server, withheld.tool) if withheld is not None else target

    def _withheld_named(self, served_name: str) -> WithheldTool | None:
        """The withheld tool that would be served as ``served_name`` (``fleet.pinning``)."""
        named = (held for held in self.fleet.withheld_tools() if self.naming.tool_name(held) == served_name)
        return next(named, None)

    async def read_resource(self, forward: Forward) -> dict[str, Any]:
        """``resources/read`` on the backend ``forward`` resolved; the contents carry served URIs."""
        server = forward.server
        if server is None:
            raise UnknownNameError("resource", forward.served_name)
        with self._passing_rejections(server):
            result: dict[str, Any] = await self.views.send(
                forward, lambda backend: backend.read_resource(server, forward.backend_name)
            )
        contents = result.get("contents")
        if isinstance(contents, list):
            result["contents"] = [
                {**item, "uri": self._catalog.served_uri(server, item["uri"])}
                if isinstance(item, dict) and isinstance(item.get("uri"), str)
                else item
                for item in contents
            ]
        return result

    async def get_prompt(self, forward: Forward, arguments: dict[str, str] | None) -> dict[str, Any]:
        server = forward.server
        if server is None:
            raise UnknownNameError("prompt", forward.served_name)
        with self._passing_rejections(server):
            prompt: dict[str, Any] = await self.views.send(
                forward, lambda backend: backend.get_prompt(server, forward.backend_name, arguments)
            )
            return prompt

    async def complete(
        self,
        ref: dict[str, Any],
        argument: dict[str, str],
        context_arguments: dict[str, str] | None,
        asker: Asker | None = None,
    ) -> dict[str, Any]:
        """``completion/complete`` for a served prompt or resource template, on its backend (if
        the guard lets ``asker`` use it)."""
        if ref.get("type") == "ref/prompt":
            target = await self.find_target("prompts", str(ref.get("name")))
            if target is None:
                raise UnknownNameError("prompt", str(ref.get("name")))
            server, name = target
            backend_ref = {**ref, "name": name}
            self.views.refuse_unless_allowed(asker, "prompts", server, name)
        else:
            server, uri = await self._resource_target(str(ref.get("uri")))
            backend_ref = {**ref, "uri": uri}
            self.views.refuse_unless_allowed(asker, "resources", server, uri)
        with self._passing_rejections(server):
            return await self.fleet.complete(server, backend_ref, argument, context_arguments)

    def _backend_rejection(self, server: str, error: MCPFleetError) -> BackendRejection | None:
        return backend_rejection(
            server,
            error,
            failed_here=self.relay.failed_here,
            served_uri=lambda uri: self._catalog.served_uri(server, uri),
        )

    @contextmanager
    def _passing_rejections(self, server: str) -> Iterator[None]:
        """Raise a backend's own JSON-RPC error as a ``BackendRejection``; other failures as they are."""
        try:
            yield
        except MCPFleetError as error:
            rejection = self._backend_rejection(server, error)
            if rejection is None:
                raise
            raise rejection from error

    async def _resource_target(self, uri: str) -> tuple[str, str]:
        target = await self.find_target("resources", uri)
        if target is None:
            raise UnknownNameError("resource", uri)
        return target

    # -- backend logs ---------------------------------------------------------------------------------------

    def _on_server_log(self, server: str, params: dict[str, Any]) -> Awaitable[None] | None:
        """Relay a backend's ``notifications/message``, with the server as logger (``server_logs``)."""
        return server_log_delivery(server, params, self.relay.flights, self.sessions)


def call_failure(
    gateway: Gateway, server: str, error: MCPFleetError, flight: InFlight | None
) -> dict[str, Any]:
    """What a call that failed with ``error`` answers: an error result naming the server and
    the reason, or (raised) the backend's own JSON-RPC error (``BackendRejection``)."""
    relay = gateway.relay

    def failed_here(code: int, message: str) -> bool:
        # The call's own record too: a fast-path call is no task's current one.
        own = flight is not None and (code, message) in flight.local_errors
        return own or relay.failed_here(code, message)

    rejection = backend_rejection(
        server,
        error,
        failed_here=failed_here,
        served_uri=lambda uri: gateway.catalog.served_uri(server, uri),
    )
    if rejection is not None:
        raise rejection from error
    return error_result(str(error))


def error_result(message: str) -> dict[str, Any]:
    """A ``tools/call`` result that reports a failure the model can read (``resultType``: a
    2026-07-28 client's result must carry it; the handshake era's sieve drops it)."""
    text = f"MCP error: {redact_text(message)}"
    return {"content": [{"type": "text", "text": text}], "isError": True, "resultType": "complete"}


def is_error_result(result: Any) -> bool:
    """Whether a ``tools/call`` result reports a failure (``isError``): the backend's result
    (the SDK's ``CallToolResult``) or one of the gateway's own (JSON)."""
    if isinstance(result, dict):
        return result.get("isError") is True
    return getattr(result, "is_error", False) is True


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
