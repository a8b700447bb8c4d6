"""OAuth for HTTP servers: token storage, the loopback redirect, settings, the SDK provider,
the non-interactive grants, and ``mcpfleet login`` / ``logout``."""
