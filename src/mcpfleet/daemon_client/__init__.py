"""The side that reaches the user's daemon, in the standard library only: the private runtime
folder (``paths``), the peer check (``peer``), connecting or starting the daemon (``launch``),
the shim that relays a host's stdio to it (``shim``) and the CLI's control client
(``control``). It imports nothing of mcpfleet but ``contract``, ``errors`` and ``paths``, so
``mcpfleet serve`` loads neither the SDK nor anyio.
"""
