"""mcpfleet: the MCP runtime of a coding agent.

Everything a user imports lives here, and nothing else (``tests/unit/test_public_surface.py``
pins the list). The names are loaded on first use: ``import mcpfleet`` and ``mcpfleet
--help`` cost almost nothing, and the ``mcp`` SDK is imported only when a server is
actually contacted.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpfleet.agent.loader import discover_and_load_mcp_tools, discover_mcp_servers, load_all_mcp_configs
    from mcpfleet.agent.session import (
        AgentSession,
        ToolRegistry,
        create_agent_session,
        open_agent_session,
    )
    from mcpfleet.errors import (
        ApprovalRequiredError,
        AuthRequiredError,
        CacheUnavailableError,
        CommandNotFoundError,
        ConfigError,
        ConfigWriteError,
        ConnectError,
        ConnectionClosedError,
        ConnectTimeoutError,
        DaemonError,
        EraMismatchError,
        Failure,
        LoginError,
        MCPFleetError,
        RequestError,
        SandboxError,
        SecretResolutionError,
        ServerExitedError,
        ServerNotConnectedError,
        ServerReconnectingError,
        ToolCallError,
        ToolNotFoundError,
        UnsafeConfigPathError,
    )
    from mcpfleet.fleet.cache import MCPToolCache
    from mcpfleet.fleet.events import ManagerEvent
    from mcpfleet.fleet.manager import MCPManager
    from mcpfleet.fleet.registry import ServerState
    from mcpfleet.fleet.startup import StartupReport
    from mcpfleet.fleet.supervision import ReconnectPolicy
    from mcpfleet.fleet.tools import DeferredMCPTool, MCPTool, ToolResult

__version__ = "0.1.0"

_HOME_OF: dict[str, str] = {
    "AgentSession": "mcpfleet.agent.session",
    "ApprovalRequiredError": "mcpfleet.errors",
    "AuthRequiredError": "mcpfleet.errors",
    "CacheUnavailableError": "mcpfleet.errors",
    "CommandNotFoundError": "mcpfleet.errors",
    "ConfigError": "mcpfleet.errors",
    "ConfigWriteError": "mcpfleet.errors",
    "ConnectError": "mcpfleet.errors",
    "ConnectTimeoutError": "mcpfleet.errors",
    "ConnectionClosedError": "mcpfleet.errors",
    "DaemonError": "mcpfleet.errors",
    "DeferredMCPTool": "mcpfleet.fleet.tools",
    "EraMismatchError": "mcpfleet.errors",
    "Failure": "mcpfleet.errors",
    "LoginError": "mcpfleet.errors",
    "MCPFleetError": "mcpfleet.errors",
    "MCPManager": "mcpfleet.fleet.manager",
    "MCPTool": "mcpfleet.fleet.tools",
    "MCPToolCache": "mcpfleet.fleet.cache",
    "ManagerEvent": "mcpfleet.fleet.events",
    "ReconnectPolicy": "mcpfleet.fleet.supervision",
    "RequestError": "mcpfleet.errors",
    "SandboxError": "mcpfleet.errors",
    "SecretResolutionError": "mcpfleet.errors",
    "ServeAddressError": "mcpfleet.errors",
    "ServerExitedError": "mcpfleet.errors",
    "ServerNotConnectedError": "mcpfleet.errors",
    "ServerReconnectingError": "mcpfleet.errors",
    "ServerState": "mcpfleet.fleet.registry",
    "StartupReport": "mcpfleet.fleet.startup",
    "ToolCallError": "mcpfleet.errors",
    "ToolNotFoundError": "mcpfleet.errors",
    "ToolRegistry": "mcpfleet.agent.session",
    "ToolResult": "mcpfleet.fleet.tools",
    "UnsafeConfigPathError": "mcpfleet.errors",
    "create_agent_session": "mcpfleet.agent.session",
    "discover_and_load_mcp_tools": "mcpfleet.agent.loader",
    "discover_mcp_servers": "mcpfleet.agent.loader",
    "load_all_mcp_configs": "mcpfleet.agent.loader",
    "open_agent_session": "mcpfleet.agent.session",
}
"""Where each public name is defined."""

__all__ = [
    "AgentSession",
    "ApprovalRequiredError",
    "AuthRequiredError",
    "CacheUnavailableError",
    "CommandNotFoundError",
    "ConfigError",
    "ConfigWriteError",
    "ConnectError",
    "ConnectTimeoutError",
    "ConnectionClosedError",
    "DaemonError",
    "DeferredMCPTool",
    "EraMismatchError",
    "Failure",
    "LoginError",
    "MCPFleetError",
    "MCPManager",
    "MCPTool",
    "MCPToolCache",
    "ManagerEvent",
    "ReconnectPolicy",
    "RequestError",
    "SandboxError",
    "SecretResolutionError",
    "ServeAddressError",
    "ServerExitedError",
    "ServerNotConnectedError",
    "ServerReconnectingError",
    "ServerState",
    "StartupReport",
    "ToolCallError",
    "ToolNotFoundError",
    "ToolRegistry",
    "ToolResult",
    "UnsafeConfigPathError",
    "create_agent_session",
    "discover_and_load_mcp_tools",
    "discover_mcp_servers",
    "load_all_mcp_configs",
    "open_agent_session",
]


def __getattr__(name: str) -> Any:
    home = _HOME_OF.get(name)
    if home is None:
        raise AttributeError(f"module 'mcpfleet' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next look-up is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
