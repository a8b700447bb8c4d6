"""The per-user daemon's serving side: one fleet shared by every host session of the user (B9).

The daemon (``daemon.service``) serves each session that ``mcpfleet serve``'s shim
(``daemon_client.shim``) relays over the private Unix socket as a gateway over the fleets it
shares (``daemon.fleet``), and answers the CLI's and the library's control requests
(``daemon.control``). What reaches it from outside lives below: the wire in ``contract.wire``,
the client side in ``daemon_client``, the library's remote session in ``agent.remote``.
"""
