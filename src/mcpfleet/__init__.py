"""mcpfleet: the MCP runtime of a coding agent.

Everything a user imports lives here. Importing it never imports the ``mcp`` SDK:
that happens only when a server is actually contacted.
"""

from mcpfleet.agent.bridge import DeferredMCPTool, MCPTool, ToolResult
from mcpfleet.agent.loader import discover_and_load_mcp_tools, discover_mcp_servers, load_all_mcp_configs
from mcpfleet.agent.session import AgentSession, ToolRegistry, create_agent_session, open_agent_session
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.manager import MCPManager

__version__ = "0.1.0"

__all__ = [
    "AgentSession",
    "DeferredMCPTool",
    "MCPManager",
    "MCPTool",
    "MCPToolCache",
    "ToolRegistry",
    "ToolResult",
    "create_agent_session",
    "discover_and_load_mcp_tools",
    "discover_mcp_servers",
    "load_all_mcp_configs",
    "open_agent_session",
]
