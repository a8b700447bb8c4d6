"""The per-user daemon: one fleet shared by every host session of the user (B9).

``mcpfleet serve``, what hosts launch, is a thin shim (``daemon.shim``) that relays the host's
stdio to the daemon over a private Unix socket (``daemon.paths``, ``daemon.wire``) and starts
the daemon when none runs (``daemon.launch``). The daemon (``daemon.service``) serves each
session as a gateway over the fleets it shares (``daemon.fleet``). The shim's modules import
the standard library only: no SDK, no anyio.
"""
