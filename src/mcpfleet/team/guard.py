"""The team gateway's ``RequestGuard`` (``gateway.guard``): policy, then audit and per-user
credentials, for the principal the identity check put in each request's scope.

``TeamGuard`` answers the gateway's questions:

- ``viewer(scope)``: the request's ``Principal`` (``team.principal``). A request without one is
  refused: no principal, no service, whatever reached the MCP endpoint;
- ``refusal(principal, kind, server, name)``: the policies' decision (``team.policy``), kept per
  (principal, server/name) until the policies change;
- ``before(request)``: a denial is recorded (``CallHooks.denied``) and refused with the
  policy's text; an allowed request is handed to ``CallHooks.permit`` (per-user credentials:
  which backend connection, or a refusal carrying the ``/connect`` link);
- ``after(request, outcome, duration_ms)``: ``CallHooks.finished`` (the audit record, written
  before the answer goes back; a failure to write it may fail the call).

``update(policies)`` (a reload of the team file) swaps the policies and, when they differ,
tells the gateway that views changed. Audit and credentials plug in as ``CallHooks``; with
none (``NO_HOOKS``) calls are decided by policy alone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Protocol

from mcpfleet.gateway.guard import ALLOWED, CallOutcome, GuardedRequest, GuardRefusal, Permit, Scope
from mcpfleet.team.policy import Decision, decide
from mcpfleet.team.principal import Principal, principal_of_scope

if TYPE_CHECKING:
    from mcpfleet.gateway.guard import ViewsChangedListener
    from mcpfleet.gateway.served_catalog import ListKind
    from mcpfleet.team.model import Policy

logger = logging.getLogger(__name__)

MAX_CACHED_DECISIONS = 100_000
"""Decisions kept between reloads (principal × server/name); past it the cache starts over."""


class CallHooks(Protocol):
    """What runs around each request a policy allows or denies: audit, per-user credentials."""

    async def denied(self, principal: Principal, request: GuardedRequest, refusal: str) -> None:
        """A request the policies refused (audit records it as ``denied``)."""

    async def permit(self, principal: Principal, request: GuardedRequest) -> Permit:
        """Where an allowed request goes (``ALLOWED``: the shared fleet), or why it cannot."""

    async def finished(
        self, principal: Principal, request: GuardedRequest, outcome: CallOutcome, duration_ms: float
    ) -> None:
        """Once the backend answered; raise ``GuardRefusal`` to fail a call that may not go
        through (its audit record could not be written, and audit fails closed)."""


class PassingHooks:
    """``CallHooks`` that let everything through and note nothing: the base of a hook that
    needs only some of the three (it overrides those)."""

    async def denied(self, principal: Principal, request: GuardedRequest, refusal: str) -> None:
        return None

    async def permit(self, principal: Principal, request: GuardedRequest) -> Permit:
        return ALLOWED

    async def finished(
        self, principal: Principal, request: GuardedRequest, outcome: CallOutcome, duration_ms: float
    ) -> None:
        return None


NO_HOOKS: CallHooks = PassingHooks()


class TeamGuard:
    """Policies and hooks for every request of a team gateway (see the module)."""

    passive = False

    def __init__(self, policies: Sequence[Policy], hooks: Sequence[CallHooks] = ()) -> None:
        self._policies = tuple(policies)
        self._hooks = tuple(hooks)
        self._decisions: dict[tuple[Principal, str, str], Decision] = {}
        self._listeners: list[ViewsChangedListener] = []

    @property
    def policies(self) -> tuple[Policy, ...]:
        return self._policies

    def update(self, policies: Sequence[Policy]) -> bool:
        """Decide by ``policies`` from now on; ``True`` (and every view recomputed) when they
        differ from the current ones."""
        policies = tuple(policies)
        if policies == self._policies:
            return False
        self._policies = policies
        self._decisions.clear()
        for listener in list(self._listeners):
            listener()
        return True

    # -- RequestGuard -------------------------------------------------------------------------------------

    def viewer(self, scope: Scope | None) -> Hashable:
        principal = principal_of_scope(scope) if scope is not None else None
        if principal is None:
            raise GuardRefusal("this team gateway serves signed-in principals only; send an access token")
        return principal

    def refusal(self, viewer: Hashable, kind: ListKind, server: str, name: str) -> str | None:
        principal = _principal(viewer)
        return self.decision(principal, server, name).denial(principal)

    def decision(self, principal: Principal, server: str, name: str) -> Decision:
        key = (principal, server, name)
        found = self._decisions.get(key)
        if found is None:
            if len(self._decisions) >= MAX_CACHED_DECISIONS:
                self._decisions.clear()
            found = self._decisions[key] = decide(self._policies, principal, server, name)
        return found

    async def before(self, request: GuardedRequest) -> Permit:
        principal = _principal(request.asker.viewer)
        refusal = self.decision(principal, request.server, request.name).denial(principal)
        if refusal is not None:
            for hooks in self._hooks:
                await hooks.denied(principal, request, refusal)
            return Permit(refusal=refusal)
        permit = ALLOWED
        for hooks in self._hooks:
            permit = await hooks.permit(principal, request)
            if permit is not ALLOWED:
                break
        return permit

    async def after(self, request: GuardedRequest, outcome: CallOutcome, duration_ms: float) -> None:
        principal = _principal(request.asker.viewer)
        for hooks in self._hooks:
            await hooks.finished(principal, request, outcome, duration_ms)

    def on_views_changed(self, listener: ViewsChangedListener) -> Callable[[], None]:
        self._listeners.append(listener)

        def stop() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return stop


def _principal(viewer: Hashable) -> Principal:
    if not isinstance(viewer, Principal):
        raise GuardRefusal("this team gateway serves signed-in principals only; send an access token")
    return viewer
