"""Processes and wires: spawning a stdio server, its kill ladder and reaping, the host
watchdog, and the HTTP transports. Nothing here knows MCP beyond framing messages."""
