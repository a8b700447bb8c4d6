"""The daemon's fleet, shared by every host session it serves (B9).

Skeleton: each view gets a fleet of its own (one ``MCPManager`` per attached session); the
sharing by scope comes next, behind the same ``SharedFleet.attach``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, Self

import anyio
import anyio.abc

from mcpfleet.config.profiles import DaemonSettings, read_gateway_settings
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.manager import MCPManager

if TYPE_CHECKING:
    from mcpfleet.client.connection import ProgressCallback, ServerConnection
    from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
    from mcpfleet.daemon.wire import FleetSpec
    from mcpfleet.fleet.catalog import AnyTool
    from mcpfleet.fleet.events import EventListener
    from mcpfleet.fleet.notifications import LogListener, ResourceListener
    from mcpfleet.fleet.server import ConnectionStatus, ServerState
    from mcpfleet.fleet.startup import StartupReport
    from mcpfleet.gateway.relay import Relay


class FleetView(anyio.AsyncContextManagerMixin):
    """One host session's window on the shared fleet: what ``Gateway(view)`` serves."""

    def __init__(self, manager: MCPManager, *, session_id: str, host: str | None, project: str) -> None:
        self._manager = manager
        self.session_id = session_id
        self.host = host
        self.project = project
        self.since = time.time()

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        # The attachment owns the view's servers: the gateway's hold ends without closing any.
        yield self

    @property
    def cache(self) -> MCPToolCache | None:
        return self._manager.cache

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        return self._manager.task_group

    def discover(self) -> DiscoveryResult:
        return self._manager.discover()

    async def connect_servers(
        self, configs: Mapping[str, ServerConfig], sources: Mapping[str, SourceInfo]
    ) -> StartupReport:
        return await self._manager.connect_servers(configs, sources)

    def get_all_server_names(self) -> list[str]:
        return self._manager.get_all_server_names()

    def get_server_config(self, name: str) -> ServerConfig | None:
        return self._manager.get_server_config(name)

    def get_server_state(self, name: str) -> ServerState:
        return self._manager.get_server_state(name)

    def get_connection_status(self, name: str) -> ConnectionStatus:
        return self._manager.get_connection_status(name)

    def get_connection(self, name: str) -> ServerConnection | None:
        return self._manager.get_connection(name)

    def get_tools(self) -> list[AnyTool]:
        return self._manager.get_tools()

    def is_deferred(self, name: str) -> bool:
        return self._manager.is_deferred(name)

    def get_timings(self, name: str) -> dict[str, float]:
        return self._manager.get_timings(name)

    async def wait_for_connection(self, name: str) -> None:
        await self._manager.wait_for_connection(name)

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        return self._manager.subscribe(listener)

    def subscribe_logs(self, listener: LogListener) -> Callable[[], None]:
        return self._manager.subscribe_logs(listener)

    async def subscribe_resource(
        self, server: str, uri: str, listener: ResourceListener
    ) -> Callable[[], None]:
        return await self._manager.subscribe_resource(server, uri, listener)

    async def call_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        return await self._manager.call_tool(
            server_name, tool_name, arguments, timeout_ms=timeout_ms, on_progress=on_progress
        )

    async def list_resources(self, server: str) -> list[dict[str, Any]]:
        return await self._manager.list_resources(server)

    async def list_resource_templates(self, server: str) -> list[dict[str, Any]]:
        return await self._manager.list_resource_templates(server)

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]:
        return await self._manager.read_resource(server, uri)

    async def list_prompts(self, server: str) -> list[dict[str, Any]]:
        return await self._manager.list_prompts(server)

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None = None
    ) -> dict[str, Any]:
        return await self._manager.get_prompt(server, name, arguments)

    async def complete(
        self,
        server: str,
        ref: dict[str, Any],
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        return await self._manager.complete(server, ref, argument, context_arguments)

    async def notify_roots_changed(self) -> None:
        await self._manager.notify_roots_changed()


class SharedFleet(anyio.AsyncContextManagerMixin):
    """The daemon's servers, shared by the views of the sessions it serves."""

    def __init__(
        self, settings: DaemonSettings, *, cache: MCPToolCache | Literal["default"] | None = "default"
    ) -> None:
        self.settings = settings
        self._cache_setting = cache
        self._cache: MCPToolCache | None = None
        self._views: list[FleetView] = []

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        self._cache = MCPToolCache.open_default() if self._cache_setting == "default" else self._cache_setting
        try:
            yield self
        finally:
            if self._cache_setting == "default" and self._cache is not None:
                self._cache.close()
            self._cache = None

    @property
    def idle(self) -> bool:
        """No view is attached."""
        return not self._views

    def attach(
        self, spec: FleetSpec, *, session_id: str, host: str | None, relay: Relay | None = None
    ) -> AbstractAsyncContextManager[FleetView]:
        """The view of one session on the fleet ``spec`` describes, for as long as the block runs."""
        return self._attached(spec, session_id=session_id, host=host, relay=relay)

    @asynccontextmanager
    async def _attached(
        self, spec: FleetSpec, *, session_id: str, host: str | None, relay: Relay | None
    ) -> AsyncIterator[FleetView]:
        profile = read_gateway_settings().profile(spec.profile) if spec.profile is not None else None
        manager = MCPManager(
            spec.cwd,
            cache=self._cache,
            startup_timeout_ms=spec.startup_timeout_ms,
            on_uncached="late-join",
            enable_project_config=spec.enable_project_config,
            trust_project=spec.trust_project,
            server_requests=relay,
            entry_filter=profile.entry_filter() if profile is not None else None,
            log_level="debug",
        )
        async with manager:
            view = FleetView(manager, session_id=session_id, host=host, project=str(manager.cwd))
            self._views.append(view)
            try:
                yield view
            finally:
                self._views.remove(view)

    def status(self) -> list[dict[str, Any]]:
        """The ``servers`` rows of ``daemon status --json``: one per backend."""
        rows: list[dict[str, Any]] = []
        for view in self._views:
            for name in view.get_all_server_names():
                state = view.get_server_state(name)
                rows.append(
                    {
                        "name": name,
                        "state": str(state.state),
                        "share": "session",
                        "sessions": 1,
                        "pid": state.pid,
                        "rss_bytes": None,
                        "idle_s": 0.0,
                        "project": view.project,
                    }
                )
        return rows
