"""The MCP notification methods mcpfleet reads or writes as plain JSON-RPC.

Where a message goes through the SDK its own types name the method; these are for the places
that read or write the lines themselves (the shim, the gateway's relay, the fleet's
notification router, the demo's host) and must agree on the spelling.
"""

from __future__ import annotations

from typing import Literal

INITIALIZED = "notifications/initialized"
CANCELLED = "notifications/cancelled"
PROGRESS = "notifications/progress"
LOG_MESSAGE = "notifications/message"
RESOURCE_UPDATED = "notifications/resources/updated"
ROOTS_LIST_CHANGED = "notifications/roots/list_changed"
TOOLS_LIST_CHANGED = "notifications/tools/list_changed"
RESOURCES_LIST_CHANGED = "notifications/resources/list_changed"
PROMPTS_LIST_CHANGED = "notifications/prompts/list_changed"

ListKind = Literal["tools", "resources", "prompts"]
LIST_CHANGED: dict[ListKind, str] = {
    "tools": TOOLS_LIST_CHANGED,
    "resources": RESOURCES_LIST_CHANGED,
    "prompts": PROMPTS_LIST_CHANGED,
}
"""The ``list_changed`` notification of each list a server (or the gateway) may change."""
