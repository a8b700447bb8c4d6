"""Environment variables that one side of mcpfleet sets or reads and another side names too.

Named here so that a light side (the console script's ``serve`` route, the CLI's options) and
a heavy one (discovery, the HTTP gateway) spell them alike without importing each other.
"""

from __future__ import annotations

GATEWAY_PID_VARIABLE = "MCPFLEET_GATEWAY_PID"
"""Set by a serving gateway in its own environment: the pid of that gateway. Its servers
inherit it, so a ``mcpfleet serve`` one of them starts refuses to serve the fleet back into
itself (``config.gateway_entry``), and the console script leaves such a ``serve`` to the CLI."""
GATEWAY_TOKEN_VARIABLE = "MCPFLEET_GATEWAY_TOKEN"
"""Where the HTTP gateway's bearer token may be given instead of a file: a process's
environment is readable by its own user only, its command line by every user (``ps``)."""
