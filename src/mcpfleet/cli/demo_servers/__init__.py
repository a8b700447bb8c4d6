"""Small MCP servers shipped with mcpfleet for the demo and the docs.

Each is a runnable module (``python -m mcpfleet.cli.demo_servers.notes``) built on the official
SDK's ``MCPServer``, the way most Python MCP servers are written.
"""
