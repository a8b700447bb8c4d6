"""The MCP hosts on this machine, and their wiring to the gateway (``mcpfleet hosts``).

Above ``config`` (it reads the hosts' files through the same provider table and writes them
with the config writer's confinement, lock and atomic write), below ``cli``. Importing it
loads nothing heavy.
"""

from mcpfleet.hosts.known import GATEWAY_ENTRY_NAME, HOST_IDS, Host, find_host, gateway_command, known_hosts
from mcpfleet.hosts.wiring import (
    HostStatus,
    WiringReport,
    host_status,
    install_gateway,
    is_gateway_entry,
    served_entries,
    uninstall_gateway,
)

__all__ = [
    "GATEWAY_ENTRY_NAME",
    "HOST_IDS",
    "Host",
    "HostStatus",
    "WiringReport",
    "find_host",
    "gateway_command",
    "host_status",
    "install_gateway",
    "is_gateway_entry",
    "known_hosts",
    "served_entries",
    "uninstall_gateway",
]
