"""What a request may see and do: the seam where a team gateway (``mcpfleet.team``) governs the
gateway without the gateway knowing anything of users.

A ``RequestGuard`` is asked about every request that comes from a client:

- ``viewer(scope)``: who asks, as far as what they may see goes, from the ASGI scope of the HTTP
  request that carried the message (``None`` over stdio). Requests with equal viewers see the
  same lists; a handshake-era session is bound to the viewer of its first request;
- ``refusal(viewer, kind, server, name)``: why that viewer may not see or use one tool, prompt or
  resource (``name`` is the backend's own name, or its URI), or ``None``. Every list a viewer is
  served leaves out what it refuses (``gateway.views``), before the tool budget and the profile
  are applied;
- ``before(request)``, once per ``tools/call``, ``resources/read`` and ``prompts/get`` that would
  reach a backend: a ``Permit``, which may refuse the request (its text reaches the client as an
  ``MCP error:``) or send it to another backend than the gateway's fleet (a connection of the
  caller's own, for a server that uses each user's upstream credentials);
- ``after(request, outcome, duration_ms)``, once the backend answered (or failed), before the
  answer goes back: it may raise ``GuardRefusal`` to fail a request it cannot let through (an
  audit record that could not be written, when audit fails closed).

A guard that changes its mind (a team file reloaded with other policies) calls the listeners of
``on_views_changed``: the gateway recomputes each session's lists and tells each client whose
view changed (``list_changed``).

The local gateway (stdio, ``--http`` with its bearer token, the daemon's sessions) runs with
``OPEN_GUARD``, which sees one viewer, refuses nothing and records nothing: ``passive`` says so,
and it is the one question a shortcut around the request path (a fast path for ``tools/call``)
asks before it skips ``before`` and ``after``.

No SDK here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mcpfleet.errors import MCPFleetError

if TYPE_CHECKING:
    from mcpfleet.client.connection import ProgressCallback
    from mcpfleet.gateway.served_catalog import ListKind

Scope = Mapping[str, Any]
"""The ASGI scope of the HTTP request that carried a message (its ``headers``, and what the
layers in front of the MCP endpoint put in it: a team gateway's principal)."""
CallOutcome = Literal["ok", "error"]
"""How a request that reached its backend ended: ``error`` for a failure or an error result."""
ViewsChangedListener = Callable[[], None]


class GuardRefusal(MCPFleetError):
    """A guard refuses a request after its backend answered (``RequestGuard.after``): the client
    gets this message instead of the answer (as an ``MCP error:`` result for a call)."""


@dataclass(frozen=True, slots=True)
class Asker:
    """Who sent one request: the guard's viewer, and the scope it was read from."""

    viewer: Hashable
    scope: Scope | None = None


@dataclass(frozen=True, slots=True)
class GuardedRequest:
    """One request on its way to a backend, as a guard is asked about it."""

    asker: Asker
    client_name: str | None
    """The client's name (``clientInfo.name``), when it gave one."""
    kind: ListKind
    server: str
    name: str
    """The backend's own tool or prompt name, or the resource's backend URI."""
    served_name: str
    """The name (or URI) as the client sent it."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """A call's arguments as they go to the backend; a prompt's arguments; nothing for a read."""
    client_capabilities: Mapping[str, Any] = field(default_factory=dict)
    """What the client declared (``elicitation``, ``sampling``…, as JSON): a guard that needs the
    user's action answers with a URL-mode elicitation only to a client that declared one."""


class GuardedBackend(Protocol):
    """Where a permitted request is sent: the gateway's fleet, or what ``Permit.backend`` names."""

    async def call_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any: ...

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]: ...

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None = None
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Permit:
    """A guard's answer before a request goes to its backend."""

    refusal: str | None = None
    """Set: the request is refused with this text, and no backend sees it."""
    backend: GuardedBackend | None = None
    """Set: the request goes there instead of the gateway's fleet (a per-user connection)."""


ALLOWED = Permit()


class RequestGuard(Protocol):
    """What a request may see and do (see the module)."""

    @property
    def passive(self) -> bool:
        """``True`` only for a guard with no opinion on any request: it sees one viewer, refuses
        nothing and records nothing, so a shortcut may skip ``before`` and ``after``."""
        ...

    def viewer(self, scope: Scope | None) -> Hashable:
        """Who sent the request carried with ``scope``, as far as what they may see goes.
        Raise ``GuardRefusal`` for a request no viewer sent (none gets past a team gateway's
        identity check; this is the last line)."""
        ...

    def refusal(self, viewer: Hashable, kind: ListKind, server: str, name: str) -> str | None:
        """Why ``viewer`` may not see or use ``server``'s ``name``; ``None``: it may."""
        ...

    async def before(self, request: GuardedRequest) -> Permit: ...

    async def after(self, request: GuardedRequest, outcome: CallOutcome, duration_ms: float) -> None: ...

    def on_views_changed(self, listener: ViewsChangedListener) -> Callable[[], None]:
        """Call ``listener`` whenever what some viewer may see changes; returns the stopper."""
        ...


class OpenGuard:
    """The local gateway's guard: one viewer (``None``), nothing refused, nothing recorded."""

    passive = True

    def viewer(self, scope: Scope | None) -> Hashable:
        return None

    def refusal(self, viewer: Hashable, kind: ListKind, server: str, name: str) -> str | None:
        return None

    async def before(self, request: GuardedRequest) -> Permit:
        return ALLOWED

    async def after(self, request: GuardedRequest, outcome: CallOutcome, duration_ms: float) -> None:
        return None

    def on_views_changed(self, listener: ViewsChangedListener) -> Callable[[], None]:
        return _never_stops


def _never_stops() -> None:
    return None


OPEN_GUARD: RequestGuard = OpenGuard()

GuardedSend = Callable[[GuardedBackend], Awaitable[Any]]
"""Sends one permitted request to the backend it is given (the fleet, or the permit's own)."""
