"""``ServedFleet``: what the gateway needs of the fleet it serves, the part of ``MCPManager`` it
runs on, as a Protocol.

``Gateway(fleet)`` serves any object with this surface. ``MCPManager`` has it as it is (one
process's own fleet, ``mcpfleet serve --no-daemon``); the daemon's ``FleetView`` has it too
(one host session's window on the fleet the daemon shares, ``mcpfleet.daemon.fleet``). Typed
as a Protocol so that mypy checks both against the gateway's use, not a duck's hope.

``async with fleet`` is the gateway's hold on the fleet for the gateway's life: a manager
connects nothing there and closes every server on the way out; a view leaves its servers to
the daemon's fleet, which outlives it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import anyio.abc

    from mcpfleet.client.connection import ProgressCallback, ServerConnection
    from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
    from mcpfleet.fleet.cache import MCPToolCache
    from mcpfleet.fleet.events import EventListener
    from mcpfleet.fleet.notifications import LogListener, ResourceListener
    from mcpfleet.fleet.pinning import WithheldTool
    from mcpfleet.fleet.registry import ConnectionStatus, ServerState
    from mcpfleet.fleet.startup import StartupReport
    from mcpfleet.fleet.tool_list import AnyTool


class ServedFleet(AbstractAsyncContextManager[object, bool | None], Protocol):
    """The servers a gateway serves, by name: their state, tools, calls and reads, events."""

    @property
    def cache(self) -> MCPToolCache | None: ...

    @property
    def task_group(self) -> anyio.abc.TaskGroup:
        """Where the gateway's relay runs work that outlives one request (a parked call)."""
        ...

    def discover(self) -> DiscoveryResult: ...

    async def connect_servers(
        self, configs: Mapping[str, ServerConfig], sources: Mapping[str, SourceInfo]
    ) -> StartupReport: ...

    def get_all_server_names(self) -> list[str]: ...

    def get_server_config(self, name: str) -> ServerConfig | None: ...

    def get_server_state(self, name: str) -> ServerState: ...

    def get_connection_status(self, name: str) -> ConnectionStatus: ...

    def get_connection(self, name: str) -> ServerConnection | None: ...

    def get_tools(self) -> list[AnyTool]: ...

    def withheld_tools(self) -> list[WithheldTool]:
        """The tools pinning keeps out of ``get_tools`` until they are approved (``fleet.pinning``)."""
        ...

    def subscribe(self, listener: EventListener) -> Callable[[], None]: ...

    def subscribe_logs(self, listener: LogListener) -> Callable[[], None]: ...

    async def subscribe_resource(
        self, server: str, uri: str, listener: ResourceListener
    ) -> Callable[[], None]: ...

    async def call_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any: ...

    async def list_resources(self, server: str) -> list[dict[str, Any]]: ...

    async def list_resource_templates(self, server: str) -> list[dict[str, Any]]: ...

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]: ...

    async def list_prompts(self, server: str) -> list[dict[str, Any]]: ...

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None = None
    ) -> dict[str, Any]: ...

    async def complete(
        self,
        server: str,
        ref: dict[str, Any],
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
    ) -> dict[str, Any]: ...

    async def notify_roots_changed(self) -> None: ...
