"""mcpfleet: the MCP runtime of a coding agent.

Everything a user imports lives here, and nothing else (``tests/unit/test_public_surface.py``
pins the list). Importing it never imports the ``mcp`` SDK: that happens only when a server
is actually contacted.
"""

from mcpfleet.agent.loader import discover_and_load_mcp_tools, discover_mcp_servers, load_all_mcp_configs
from mcpfleet.agent.session import AgentSession, ToolRegistry, create_agent_session, open_agent_session
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
    EraMismatchError,
    Failure,
    LoginError,
    MCPFleetError,
    RequestError,
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
from mcpfleet.fleet.server import ServerState
from mcpfleet.fleet.startup import StartupReport
from mcpfleet.fleet.supervision import ReconnectPolicy
from mcpfleet.fleet.tools import DeferredMCPTool, MCPTool, ToolResult

__version__ = "0.1.0"

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
    "SecretResolutionError",
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
