"""The agent side: MCP tools as agent tools (the bridge), the loader, and the session."""
