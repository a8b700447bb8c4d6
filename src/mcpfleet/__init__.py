"""mcpfleet: the MCP runtime of a coding agent."""

__version__ = "0.1.0"
