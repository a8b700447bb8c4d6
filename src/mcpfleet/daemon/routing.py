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
* with no call in flight (a server asking for roots as it starts, or of its own accord): the
  session that sees the server, when exactly one does; otherwise nobody can say whose
  question it is, and it is refused with an error to the server (roots included), logged
  naming the server. A question is never sent to a session whose call did not cause it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from mcpfleet.errors import DaemonError
from mcpfleet.gateway.forward import asking_flight
from mcpfleet.gateway.relay import ELICITATION, ROOTS, SAMPLING, Relay, relayed_sampling_capability

if TYPE_CHECKING:
    from mcpfleet.daemon.scopes import Scope

logger = logging.getLogger(__name__)

_INVALID_REQUEST = -32600

RelaysOf = Callable[[str], Sequence[Relay]]
"""The relays of the sessions that use (or used, while attached) a server of the scope."""
AmbiguousHandler = Callable[[str], None]
"""Told the name of a server whose question could not be tied to one session."""


class Ambiguous(DaemonError):
    """Two sessions have calls in flight on the server that asked."""


class Untied(DaemonError):
    """No call is in flight on the server that asked, and not exactly one session sees it."""

    def __init__(self, sessions: int) -> None:
        super().__init__(sessions)
        self.sessions = sessions


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
            relay = self._route(server)
        except Ambiguous:
            self._on_ambiguous(server)
            return None
        except Untied as untied:
            _refuse_untied(server, ROOTS, untied.sessions)
        return await relay.list_roots(server)

    def _relay_for(self, server: str, method: str, params: dict[str, Any]) -> Relay:
        try:
            return self._route(server)
        except Ambiguous:
            self._on_ambiguous(server)
            _refuse(
                f"{method} refused: two sessions have calls in flight on the shared MCP server "
                f'"{server}", and its question cannot be tied to one of them; the mcpfleet daemon '
                "gives it one backend per session from now on, so retry the call"
            )
        except Untied as untied:
            _refuse_untied(server, method, untied.sessions)

    def _route(self, server: str) -> Relay:
        """The relay of the session whose call caused the question; raises ``Ambiguous`` or
        ``Untied`` when there is no one such session."""
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
        # No call in flight: only a session alone with the server can be asked. Every attached
        # session counts, those that cannot be asked too (a command line's), since any of them
        # may be the one the question is about.
        sessions = len(self._scope.seen_by.get(server, ()))
        if sessions == 1 and len(relays) == 1:
            return relays[0]
        raise Untied(sessions)


def _refuse_untied(server: str, method: str, sessions: int) -> NoReturn:
    seen = "no session uses it" if sessions == 0 else f"{sessions} sessions use it"
    message = (
        f'{method} refused: the MCP server "{server}" asked with no call in flight and {seen}, so '
        "the question cannot be tied to the session it is for; a question is answered only "
        'within the call that caused it (give the server "share": "session" to have one backend '
        "per session)"
    )
    # Several sessions: a question that went to the wrong one would be a leak, worth a warning.
    # None: nobody could have been asked (a server asking for roots before its session is up).
    logger.log(logging.WARNING if sessions > 1 else logging.INFO, "%s", message)
    _raise_refusal(message)


def _refuse(message: str) -> NoReturn:
    logger.info("%s", message)
    _raise_refusal(message)


def _raise_refusal(message: str) -> NoReturn:
    from mcp.shared.exceptions import MCPError

    raise MCPError(code=_INVALID_REQUEST, message=message)
