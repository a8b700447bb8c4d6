"""What every backend lists beside its tools: resources, resource templates and prompts.

The fleet lists a server's tools when it connects; the gateway must serve these three lists
too, and answer them at once, like ``tools/list``, even while a backend is still starting.
So each backend's lists are:

* read from the tool cache when the gateway starts (``MCPToolCache.get_listings``, one row
  per server and config fingerprint, beside the tools' row), and served from there until
  the backend answers;
* listed again when the backend connects (every connection, reconnections included), and
  when it announces ``resources/list_changed`` or ``prompts/list_changed``;
* written back to the cache after each listing, so the next start serves them at once.

A backend that does not declare ``resources`` (or ``prompts``) is not asked for them. A
listing that fails keeps what was known and logs why; every request is bounded by the
connection's own request timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import anyio

from mcpfleet.errors import MCPFleetError

if TYPE_CHECKING:
    from mcpfleet.gateway.served_fleet import ServedFleet

logger = logging.getLogger(__name__)

ListingKind = Literal["resources", "resource_templates", "prompts"]
LISTING_KINDS: tuple[ListingKind, ...] = ("resources", "resource_templates", "prompts")
RESOURCE_KINDS: tuple[ListingKind, ...] = ("resources", "resource_templates")

_CAPABILITY_OF: dict[ListingKind, str] = {
    "resources": "resources",
    "resource_templates": "resources",
    "prompts": "prompts",
}

METHOD_NOT_FOUND = -32601
"""JSON-RPC's code for a method the server does not have."""

ServerListings = Mapping[ListingKind, list[dict[str, Any]]]


class Listings:
    """Each backend's resources, resource templates and prompts, as last listed or cached."""

    def __init__(self, fleet: ServedFleet, on_change: Callable[[], None]) -> None:
        self._fleet = fleet
        self._on_change = on_change
        self._by_server: dict[str, dict[ListingKind, list[dict[str, Any]]]] = {}
        self._locks: dict[str, anyio.Lock] = {}
        self.refreshing = 0
        """How many refreshes are under way (the gateway waits for them before calling a name unknown)."""

    def snapshot(self) -> dict[str, ServerListings]:
        """Every known backend's lists (copies of the mappings; the items are shared, never mutated)."""
        return {server: dict(kinds) for server, kinds in self._by_server.items()}

    def load_cached(self, server: str) -> None:
        """Serve what the cache remembers of ``server`` until it answers itself."""
        cache = self._fleet.cache
        config = self._fleet.get_server_config(server)
        if cache is None or config is None or server in self._by_server:
            return
        cached = cache.get_listings(server, config.fingerprint)
        if cached:
            self._by_server[server] = {kind: cached.get(kind, []) for kind in LISTING_KINDS}

    def forget(self, server: str) -> None:
        if self._by_server.pop(server, None) is not None:
            self._on_change()
        self._locks.pop(server, None)

    async def refresh(self, server: str, kinds: tuple[ListingKind, ...] = LISTING_KINDS) -> None:
        """List ``kinds`` on ``server`` now (one refresh per server at a time) and remember them."""
        self.refreshing += 1
        try:
            await self._refresh(server, kinds)
        finally:
            self.refreshing -= 1
            # Marks the gateway dirty even when nothing changed: the catalog is rebuilt, which
            # wakes requests waiting for this listing to tell a known name from an unknown one.
            self._on_change()

    async def _refresh(self, server: str, kinds: tuple[ListingKind, ...]) -> None:
        lock = self._locks.setdefault(server, anyio.Lock())
        async with lock:
            connection = self._fleet.get_connection(server)
            if connection is None or connection.ended:
                return
            declared = connection.capabilities
            current = self._by_server.get(server, {})
            listed: dict[ListingKind, list[dict[str, Any]]] = {
                kind: current.get(kind, []) for kind in LISTING_KINDS
            }
            for kind in kinds:
                if _CAPABILITY_OF[kind] not in declared:
                    listed[kind] = []
                    continue
                try:
                    listed[kind] = await self._list(server, kind)
                except MCPFleetError as error:
                    if getattr(error.__cause__, "code", None) == METHOD_NOT_FOUND:
                        # Declaring ``resources`` without templates is common and allowed.
                        listed[kind] = []
                        continue
                    logger.warning(
                        "listing the %s of MCP server %s failed: %s", kind.replace("_", " "), server, error
                    )
            if self._fleet.get_server_config(server) is None:
                return  # removed meanwhile
            if listed != current:
                self._by_server[server] = listed
            self._remember(server, listed)

    async def _list(self, server: str, kind: ListingKind) -> list[dict[str, Any]]:
        if kind == "resources":
            return await self._fleet.list_resources(server)
        if kind == "resource_templates":
            return await self._fleet.list_resource_templates(server)
        return await self._fleet.list_prompts(server)

    def _remember(self, server: str, listed: dict[ListingKind, list[dict[str, Any]]]) -> None:
        cache = self._fleet.cache
        config = self._fleet.get_server_config(server)
        if cache is None or config is None:
            return
        cache.put_listings(server, config.fingerprint, {kind: items for kind, items in listed.items()})
