"""A backend's log messages (``notifications/message``), relayed to the clients that want them.

A client with a call in flight on that server gets it with the call (its latest one), so that
over HTTP it rides the call's response stream; every other client that wants the level gets it
on its session. Who receives it is decided when the message arrives, and the sending runs
after: a log the backend wrote just before answering a call still reaches that call's client,
and the call's answer waits for it (``InFlight.log_deliveries``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from mcpfleet.gateway.forward import InFlight, InFlightRegistry
    from mcpfleet.gateway.sessions import ClientSession

logger = logging.getLogger(__name__)


def server_log_delivery(
    server: str, params: dict[str, Any], flights: InFlightRegistry, sessions: Iterable[ClientSession]
) -> Awaitable[None] | None:
    """The sending of one log message of ``server`` to whoever gets it (``None``: nobody)."""
    level = params.get("level")
    if not isinstance(level, str):
        return None
    relayed = {**params, "logger": server}
    calls: dict[ClientSession, InFlight] = {}
    for request in flights.on(server):
        if request.on_log is not None:
            calls[request.client] = request
    receivers = [client for client in sessions if client.wants_log(level) and client not in calls]
    if not receivers and not calls:
        return None
    deliveries = [(request, anyio.Event()) for request in calls.values()]
    for request, delivered in deliveries:
        request.log_deliveries.append(delivered)

    async def send() -> None:
        try:
            for client in receivers:
                await client.notify("notifications/message", relayed)
            for request, delivered in deliveries:
                assert request.on_log is not None
                try:
                    await request.on_log(relayed)
                except Exception as error:
                    logger.debug("could not relay a log message to a client: %r", error)
                delivered.set()
        finally:
            for _, delivered in deliveries:
                delivered.set()

    return send()
