"""The defaults that more than one side of mcpfleet states: each one written once, here.

The library (``MCPManager``, ``open_agent_session``), the CLI's options, the gateway and the
daemon's wire all default to these, so a session, a ``mcpfleet serve`` in this process and one
served through the daemon start alike when nothing is given.
"""

from __future__ import annotations

from typing import Literal, get_args

STARTUP_TIMEOUT_MS = 250
"""The start-up gate (``--startup-timeout``): how long connecting waits before handing out
what is ready; ``0`` waits for every server."""

MAX_TOOL_NAME_LENGTH = 64
"""The longest tool name handed out: strict LLM providers check names against
``^[a-zA-Z0-9_-]{1,64}$`` (``--max-name-length``'s default)."""
TOOL_NAME_HASH_LENGTH = 8
"""The hash a name shortened to its limit ends with (``fleet.tools``)."""
MIN_TOOL_NAME_LENGTH = TOOL_NAME_HASH_LENGTH + 2
"""The shortest limit a name can be shortened to: one kept character, ``_`` and the hash."""

PrefixMode = Literal["always", "none"]
"""``--prefix``: serve ``<server>_<tool>``, or the names as the servers give them."""
PREFIX_MODES: tuple[PrefixMode, ...] = get_args(PrefixMode)
DEFAULT_PREFIX: PrefixMode = "always"

ToolMode = Literal["all", "search", "auto"]
"""``--tools``: every tool, the ``find_tools``/``call_tool`` pair, or either by the client's budget."""
TOOL_MODES: tuple[ToolMode, ...] = get_args(ToolMode)
DEFAULT_TOOL_MODE: ToolMode = "auto"

MAX_HOST_MESSAGE_BYTES = 16 * 1024 * 1024
"""The longest line a host may send the gateway on stdio, served in its own process or through
the shim; a longer one is dropped (and answered ``Invalid Request`` when it was a request)."""
