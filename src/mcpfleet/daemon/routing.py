"""Backend → client requests in a shared fleet: which session's client a question goes to.

Each scope's manager answers its servers' ``sampling/createMessage``, ``elicitation/create``
and ``roots/list`` through one ``RequestRouter``, which hands the question to the relay of
the session that caused it (that relay then picks the call and the client, as it does for a
fleet of its own, ``gateway.relay``):

* a 2026-07-28 backend asks from inside the call's own task: the call is known exactly, and
  so is the session it belongs to;
* a handshake-era backend asks on its connection, unrelated to any call: the session with a
  call in flight on that server. When two sessions have calls in flight there, nobody can
  tell whose question it is: it is refused (roots fall back to the working folder), and the
  server is marked as needing one backend per session from then on (``on_ambiguous``);
* with no call in flight (a server asking for roots as it starts): the session whose client
  that can answer was active most recently.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from mcpfleet.gateway.relay import (
    ELICITATION,
    ROOTS,
    SAMPLING,
    Relay,
    asking_flight,
    relayed_sampling_capability,
)

if TYPE_CHECKING:
    from mcpfleet.daemon.scopes import Scope

logger = logging.getLogger(__name__)

_INVALID_REQUEST = -32600

RelaysOf = Callable[[str], Sequence[Relay]]
"""The relays of the sessions that use (or used, while attached) a server of the scope."""
AmbiguousHandler = Callable[[str], None]
"""Told the name of a server whose question could not be tied to one session."""


class Ambiguous(Exception):
    """Two sessions have calls in flight on the server that asked."""


class RequestRouter:
    """One scope's ``ServerRequestHandler``: every question goes to one session's relay."""

    def __init__(self, scope: Scope, *, relays_of: RelaysOf, on_ambiguous: AmbiguousHandler) -> None:
        self._scope = scope
        self._relays_of = relays_of
        self._on_ambiguous = on_ambiguous

    @property
    def sampling_capability(self) -> dict[str, Any] | None:
        return relayed_sampling_capability()  # as the relay of each session declares it

    @property
    def offers_elicitation(self) -> bool:
        return True

    async def create_message(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        relay = self._relay_for(server, SAMPLING, params)
        return await relay.create_message(server, params)

    async def elicit(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        relay = self._relay_for(server, ELICITATION, params)
        return await relay.elicit(server, params)

    async def list_roots(self, server: str) -> list[dict[str, Any]] | None:
        try:
            relay = self._route(server, ROOTS, {})
        except Ambiguous:
            self._on_ambiguous(server)
            return None
        return await relay.list_roots(server) if relay is not None else None

    def _relay_for(self, server: str, method: str, params: dict[str, Any]) -> Relay:
        try:
            relay = self._route(server, method, params)
        except Ambiguous:
            self._on_ambiguous(server)
            _refuse(
                f"{method} refused: two sessions have calls in flight on the shared MCP server "
                f'"{server}", and its question cannot be tied to one of them; the mcpfleet daemon '
                "gives it one backend per session from now on, so retry the call"
            )
        if relay is None:
            _refuse(f'{method} refused: no session of the mcpfleet daemon uses the MCP server "{server}"')
        return relay

    def _route(self, server: str, method: str, params: dict[str, Any]) -> Relay | None:
        relays = self._relays_of(server)
        manager = self._scope.manager
        flight = asking_flight(server, manager.get_connection(server) if manager is not None else None)
        if flight is not None:
            for relay in relays:
                if relay.owns(flight):
                    return relay
        calling = [relay for relay in relays if relay.flights_on(server)]
        if len(calling) > 1:
            raise Ambiguous(server)
        if calling:
            return calling[0]
        best: tuple[float, Relay] | None = None
        for relay in relays:
            client = relay.capable_client(method, params)
            if client is not None and (best is None or client.last_active > best[0]):
                best = (client.last_active, relay)
        if best is not None:
            return best[1]
        # Nobody can answer: the most recent session's relay refuses with its own words.
        return relays[-1] if relays else None


def _refuse(message: str) -> NoReturn:
    from mcp.shared.exceptions import MCPError

    logger.info("%s", message)
    raise MCPError(code=_INVALID_REQUEST, message=message)
