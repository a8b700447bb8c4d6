"""The fleet served as one MCP server (``mcpfleet serve``).

``core.Gateway`` owns the fleet and routes requests, ``naming`` names what is served,
``catalog`` builds what is served, ``sessions`` keeps the connected clients, ``server``
turns the gateway into the SDK's lowlevel ``Server`` and ``stdio`` serves it on
stdin/stdout. Only ``server`` and ``stdio`` import the SDK.
"""
