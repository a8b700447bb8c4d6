"""Processes and wires: a stdio server's process (spawn, stderr, the kill ladder, its
descendants), the host watchdog, the stdio framing and the HTTP transports. Nothing here
knows MCP beyond framing messages, and nothing here imports ``mcpfleet.client``: a transport
receives its environment and headers with every secret already resolved."""
