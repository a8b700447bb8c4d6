"""mcpfleet: the MCP runtime of a coding agent.

Everything a user imports lives here (S20). Importing it never imports the ``mcp`` SDK:
that happens only when a server is actually contacted.
"""

from mcpfleet.bridge import DeferredMCPTool, MCPTool, ToolResult
from mcpfleet.cache import MCPToolCache
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.loader import discover_and_load_mcp_tools, discover_mcp_servers
from mcpfleet.manager import MCPManager
from mcpfleet.session import AgentSession, ToolRegistry, create_agent_session

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
]
