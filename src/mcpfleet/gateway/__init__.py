"""The fleet served as one MCP server (``mcpfleet serve``).

``assembly.open_gateway`` builds a gateway over a fleet (``served_fleet.ServedFleet``: this
process's ``MCPManager`` or a daemon session's view). ``core.Gateway`` owns that fleet and
resolves each request once (``forward.Forward``), ``naming`` names what is served,
``served_catalog`` builds what is served, ``budget`` decides which tools each client gets,
``sessions`` keeps the connected clients, ``relay`` takes backends' questions to the client
that caused them, ``handlers`` turns the gateway into the SDK's lowlevel ``Server`` and
``stdio``/``http`` serve it. Only ``handlers``, ``stdio`` and ``http`` import the SDK.
"""
