"""The names the gateway serves: tool and prompt names, resource URIs, and their way back.

With ``--prefix always`` (the default) a tool or prompt is served as ``<server>_<name>``,
named by the bridge's own rules (``fleet.tools.assign_tool_names`` without the ``mcp_``
prefix): the same sanitising, the same hash suffix past the length limit, the same
deterministic winner of a collision, so a name depends only on the set of pairs and is
stable across restarts. A resource URI (or URI template) is served as
``mcpfleet://<server>/<the backend's URI>``: a client that fills a template's ``{var}``
fills it inside the backend's part, so the URI it reads still leads back to the server.

With ``--prefix none`` names and URIs pass through unchanged; two servers offering the same
one is a ``NameCollision`` (the gateway refuses to start on one).

Every mapping here is a plain dict built from plain data: no SDK, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from mcpfleet.contract.defaults import DEFAULT_PREFIX, MAX_TOOL_NAME_LENGTH, MIN_TOOL_NAME_LENGTH
from mcpfleet.contract.defaults import PrefixMode as PrefixMode
from mcpfleet.fleet.tools import assign_tool_names, mcp_tool_name

if TYPE_CHECKING:
    from mcpfleet.fleet.pinning import WithheldTool

URI_SCHEME = "mcpfleet"
_URI_START = f"{URI_SCHEME}://"


@dataclass(frozen=True)
class NamingPolicy:
    """How the gateway names what it serves (``--prefix``, ``--max-name-length``)."""

    prefix: PrefixMode = DEFAULT_PREFIX
    max_name_length: int = MAX_TOOL_NAME_LENGTH

    def __post_init__(self) -> None:
        if self.max_name_length < MIN_TOOL_NAME_LENGTH:
            raise ValueError(
                f"--max-name-length must be at least {MIN_TOOL_NAME_LENGTH}, not {self.max_name_length}"
            )

    def tool_name(self, tool: WithheldTool) -> str:
        """The name a withheld tool would be served under (its own, or prefixed by its server's)."""
        if self.prefix != "always":
            return tool.tool
        return mcp_tool_name(tool.server, tool.tool, prefix="", max_length=self.max_name_length)


@dataclass(frozen=True)
class NameCollision:
    """Two servers offering the same served name while names pass through unchanged."""

    kind: str
    """``tool``, ``prompt``, ``resource`` or ``resource template``."""
    name: str
    servers: tuple[str, str]

    def message(self) -> str:
        first, second = self.servers
        return (
            f'servers "{first}" and "{second}" both offer the {self.kind} "{self.name}"; '
            "with --prefix none every name must be unique: drop --prefix none, or disable one of them"
        )


@dataclass
class ServedNames:
    """Served name ↔ ``(server, name)`` for one kind of named item (tools, or prompts)."""

    by_pair: dict[tuple[str, str], str] = field(default_factory=dict)
    by_served: dict[str, tuple[str, str]] = field(default_factory=dict)
    collisions: list[NameCollision] = field(default_factory=list)

    def served(self, server: str, name: str) -> str | None:
        return self.by_pair.get((server, name))

    def resolve(self, served: str) -> tuple[str, str] | None:
        """The ``(server, name)`` behind a served name, or ``None`` for a name never served."""
        return self.by_served.get(served)


def assign_served_names(
    pairs: Iterable[tuple[str, str]], policy: NamingPolicy, *, kind: str = "tool"
) -> ServedNames:
    """Name every ``(server, name)`` pair under ``policy``.

    Under ``--prefix none`` a name two servers share is served for the first server in sorted
    order only, and the clash is recorded in ``collisions``.
    """
    names = ServedNames()
    if policy.prefix == "always":
        names.by_pair = assign_tool_names(pairs, prefix="", max_length=policy.max_name_length)
    else:
        for server, name in sorted(set(pairs)):
            owner = names.by_served.get(name)
            if owner is not None:
                names.collisions.append(NameCollision(kind, name, (owner[0], server)))
                continue
            names.by_pair[(server, name)] = name
            names.by_served[name] = (server, name)
        return names
    names.by_served = {served: pair for pair, served in names.by_pair.items()}
    return names


def served_uri(server: str, uri: str, policy: NamingPolicy) -> str:
    """The URI (or URI template) under which the gateway serves ``server``'s ``uri``."""
    if policy.prefix == "none":
        return uri
    return f"{_URI_START}{quote(server, safe='')}/{uri}"


def split_served_uri(served: str) -> tuple[str, str] | None:
    """``(server, backend URI)`` of a URI built by ``served_uri`` with the prefix, else ``None``."""
    if not served.startswith(_URI_START):
        return None
    server, slash, uri = served[len(_URI_START) :].partition("/")
    if not slash or not server:
        return None
    return unquote(server), uri
