"""The words reports and their errors are made of: a count with its noun, and the error line
for a name no server or tool answers to, with a "did you mean" of the closest names.

The CLI and the daemon both say these, so a command answered by the daemon fails with the
very line it would print in-process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpfleet.fleet.tool_list import AnyTool


def counted(count: Any, noun: str, plural: str | None = None) -> str:
    """``1 tool``, ``2 tools``, ``0 tools``: a count with its noun in the right number."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


CLOSE_NAMES_SHOWN = 3
"""At most this many names follow a "did you mean": a fleet has hundreds of tools."""


def close_names(name: str, known: Iterable[str]) -> list[str]:
    """The few names of ``known`` closest to ``name``, best first (none when none is close)."""
    import difflib

    return difflib.get_close_matches(name, list(dict.fromkeys(known)), n=CLOSE_NAMES_SHOWN, cutoff=0.6)


def _did_you_mean(name: str, known: Iterable[str]) -> str:
    close = close_names(name, known)
    return f"; did you mean {' or '.join(repr(candidate) for candidate in close)}?" if close else ""


def unknown_server_message(name: str, server_names: Iterable[str]) -> str:
    """The error line for a server name that no discovered config declares."""
    return (
        f"no server named {name!r}{_did_you_mean(name, server_names)} (`mcpfleet config` lists the servers)"
    )


def unknown_tool_message(name: str, known: Iterable[str]) -> str:
    """``call``'s error line for a name no tool answers to (``known``: the tools' names)."""
    return f"no tool named {name!r}{_did_you_mean(name, known)} (`mcpfleet tools` lists them)"


def no_such_tool_message(query: str, tools: Iterable[AnyTool], server_names: Iterable[str]) -> str:
    """``call``'s error line for ``query`` that no tool answers to, with the right noun: no
    such server, or no such tool on a server that exists (``server_names``: every server
    the config files declare, whatever its state)."""
    from mcpfleet.fleet.tools import servers_named_by

    names = list(server_names)
    named = servers_named_by(query, names)
    if named.written is None:
        return unknown_tool_message(query, [tool.name for tool in tools])
    if not named.servers:
        return unknown_server_message(named.written, names)
    theirs = [tool for tool in tools if tool.server_name in named.servers]
    # Close by the tool part alone (every name shares the server's), shown in the user's spelling.
    shown = {tool.mcp_tool_name: tool.label if "/" in query else tool.name for tool in theirs}
    close = [shown[name] for name in close_names(named.tool, shown)]
    hint = f"; did you mean {' or '.join(repr(name) for name in close)}?" if close else ""
    where = " or ".join(repr(server) for server in named.servers)
    listing = f"`mcpfleet tools --server {named.servers[0]}` lists its {counted(len(theirs), 'tool')}"
    return f"no tool named {query!r} on server {where}{hint} ({listing})"
