"""The resources clients subscribed to through the gateway: one backend subscription per served
URI, however many clients asked for it, dropped with its last client.

A change of the resource reaches each handshake-era client that subscribed (its
``notifications/resources/updated``) and the listeners of ``on_updated`` (the 2026-07-28 listen
streams). ``Gateway.subscriptions`` is the one instance of a gateway; the handlers call it.

No SDK here.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from mcpfleet.contract import notifications

if TYPE_CHECKING:
    from mcpfleet.gateway.guard import Asker
    from mcpfleet.gateway.served_fleet import ServedFleet
    from mcpfleet.gateway.sessions import ClientSession
    from mcpfleet.gateway.views import Views

ResourceUpdatedListener = Callable[[str], Awaitable[None]]
ResourceTarget = Callable[[str], Awaitable[tuple[str, str]]]
"""``(server, backend URI)`` behind a served URI; ``UnknownNameError`` for one not served."""
PassingRejections = Callable[[str], AbstractContextManager[None]]
"""Turns a backend's own JSON-RPC error (of that server) into a ``BackendRejection``."""


@dataclass(eq=False)
class _Subscription:
    """One backend resource that clients subscribed to, through one served URI."""

    stop: Callable[[], None]
    clients: weakref.WeakSet[ClientSession] = field(default_factory=weakref.WeakSet)


class ResourceSubscriptions:
    """Every served URI some client is subscribed to, and who is."""

    def __init__(
        self,
        fleet: ServedFleet,
        views: Views,
        *,
        target: ResourceTarget,
        passing_rejections: PassingRejections,
        on_updated: Callable[[str], Awaitable[None]],
    ) -> None:
        """``on_updated(uri)`` is called after the subscribed clients were told (the gateway's
        listeners)."""
        self._fleet = fleet
        self._views = views
        self._target = target
        self._passing_rejections = passing_rejections
        self._on_updated = on_updated
        self._by_uri: dict[str, _Subscription] = {}
        self._lock = anyio.Lock()

    async def subscribe(self, client: ClientSession, uri: str, asker: Asker | None = None) -> None:
        """Tell ``client`` (and 2026-07-28 listen streams) when the resource behind ``uri``
        changes, if the guard lets ``asker`` read it."""
        server, backend_uri = await self._target(uri)
        self._views.refuse_unless_allowed(asker, "resources", server, backend_uri)
        async with self._lock:
            subscription = self._by_uri.get(uri)
            if subscription is None:

                async def relay(_server: str, _uri: str) -> None:
                    await self._updated(uri)

                with self._passing_rejections(server):
                    stop = await self._fleet.subscribe_resource(server, backend_uri, relay)
                subscription = self._by_uri[uri] = _Subscription(stop)
            subscription.clients.add(client)

    async def unsubscribe(self, client: ClientSession, uri: str) -> None:
        async with self._lock:
            subscription = self._by_uri.get(uri)
            if subscription is None:
                return
            subscription.clients.discard(client)
            if not subscription.clients:
                del self._by_uri[uri]
                subscription.stop()

    def close(self) -> None:
        """Stop every backend subscription (the gateway is closing)."""
        for subscription in self._by_uri.values():
            subscription.stop()
        self._by_uri.clear()

    async def _updated(self, uri: str) -> None:
        subscription = self._by_uri.get(uri)
        for client in list(subscription.clients) if subscription is not None else ():
            if client.registered:
                await client.notify(notifications.RESOURCE_UPDATED, {"uri": uri})
        await self._on_updated(uri)
