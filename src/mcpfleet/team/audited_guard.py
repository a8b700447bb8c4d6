"""The audit log on the gateway's guard seam: every tool call a team gateway is asked for, recorded.

``AuditedGuard`` wraps the team gateway's guard (``gateway.guard.RequestGuard``: policies,
per-user backends) and leaves every decision to it; it adds the records:

- a call the inner guard refuses in ``before`` is recorded ``denied`` before the refusal goes
  back (no backend saw it; its duration is the time the decision took). The call is refused
  whatever happens, so an audit record that cannot be written then is logged, and the client
  still reads the policy's own words;
- a call that went to its backend is recorded in ``after``, with the gateway's outcome (``ok``,
  or ``error`` for a failure or an error result) and the backend's duration, before the answer
  goes back. When that record cannot be written and the audit log fails closed, the answer is
  replaced by the reason (``GuardRefusal``: the client gets an ``MCP error:``).

The user is the principal's ``subject`` (the token's ``sub``; ``service:NAME`` for a service
account), read from the request's ASGI scope where the identity check put it. Only tool calls
are recorded: the contract's record names a tool; a resource read or a prompt's text passes
through the inner guard alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable

from mcpfleet.gateway.guard import (
    CallOutcome,
    GuardedRequest,
    GuardRefusal,
    Permit,
    RequestGuard,
    Scope,
    ViewsChangedListener,
)
from mcpfleet.gateway.served_catalog import ListKind
from mcpfleet.team.audit import AuditLog, AuditWriteError
from mcpfleet.team.principal import principal_of_scope
from mcpfleet.team.state import Outcome

logger = logging.getLogger(__name__)

NO_PRINCIPAL = "(no principal)"
"""The user of a record whose request carried no principal: none passes a team gateway's
identity check, so seeing this in the log means a guard was used without one."""


class AuditedGuard:
    """``inner``'s decisions, each tool call recorded in ``audit`` (see the module docstring)."""

    passive = False

    def __init__(self, inner: RequestGuard, audit: AuditLog) -> None:
        self.inner = inner
        self.audit = audit

    def viewer(self, scope: Scope | None) -> Hashable:
        return self.inner.viewer(scope)

    def refusal(self, viewer: Hashable, kind: ListKind, server: str, name: str) -> str | None:
        return self.inner.refusal(viewer, kind, server, name)

    def on_views_changed(self, listener: ViewsChangedListener) -> Callable[[], None]:
        return self.inner.on_views_changed(listener)

    async def before(self, request: GuardedRequest) -> Permit:
        started = time.perf_counter()
        permit = await self.inner.before(request)
        if permit.refusal is not None and request.kind == "tools":
            try:
                await self._record(request, "denied", (time.perf_counter() - started) * 1000)
            except AuditWriteError as error:
                logger.error("%s (the call was denied: %s)", error, permit.refusal)
        return permit

    async def after(self, request: GuardedRequest, outcome: CallOutcome, duration_ms: float) -> None:
        if request.kind == "tools":
            try:
                await self._record(request, outcome, duration_ms)
            except AuditWriteError as error:
                raise GuardRefusal(str(error)) from error
        await self.inner.after(request, outcome, duration_ms)

    async def _record(self, request: GuardedRequest, outcome: Outcome, duration_ms: float) -> None:
        principal = principal_of_scope(request.asker.scope or {})
        await self.audit.record(
            user=principal.subject if principal is not None else NO_PRINCIPAL,
            client=request.client_name,
            server=request.server,
            tool=request.name,
            arguments=request.arguments,
            outcome=outcome,
            duration_ms=duration_ms,
        )
