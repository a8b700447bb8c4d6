"""The audit log on the team guard's call hooks (``team.guard.CallHooks``): every tool call a
team gateway is asked for, recorded.

``TeamGuard`` decides each request by policy and tells its hooks; ``AuditHooks`` turns what it
hears into records (``team.audit``):

- ``denied``: a call the policies refused is recorded ``denied`` before the refusal goes back (no
  backend saw it). The call is refused whatever happens, so a record that cannot be written then
  is logged, and the client still reads the policy's own words;
- ``finished``: a call that went to its backend is recorded with the gateway's outcome (``ok``,
  or ``error`` for a failure or an error result) and the backend's duration, before the answer
  goes back. When that record cannot be written and the audit log fails closed, the answer is
  replaced by the reason (``GuardRefusal``: the client gets an ``MCP error:``);
- ``permit``: audit has no say in where a call goes (``ALLOWED``), so it goes first among the
  hooks: the per-user credentials hook after it decides.

The user is the principal's ``subject`` (the token's ``sub``; ``service:NAME`` for a service
account). Only tool calls are recorded: the contract's record names a tool; a resource read or a
prompt's text is decided by policy alone.
"""

from __future__ import annotations

import logging

from mcpfleet.gateway.guard import ALLOWED, CallOutcome, GuardedRequest, GuardRefusal, Permit
from mcpfleet.team.audit import AuditLog, AuditWriteError
from mcpfleet.team.principal import Principal
from mcpfleet.team.state import Outcome

logger = logging.getLogger(__name__)


class AuditHooks:
    """``CallHooks`` that record each tool call in ``audit`` (see the module docstring)."""

    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit

    async def denied(self, principal: Principal, request: GuardedRequest, refusal: str) -> None:
        if request.kind != "tools":
            return
        try:
            await self._record(principal, request, "denied", 0.0)
        except AuditWriteError as error:
            logger.error("%s (the call was denied: %s)", error, refusal)

    async def permit(self, principal: Principal, request: GuardedRequest) -> Permit:
        return ALLOWED

    async def finished(
        self, principal: Principal, request: GuardedRequest, outcome: CallOutcome, duration_ms: float
    ) -> None:
        if request.kind != "tools":
            return
        try:
            await self._record(principal, request, outcome, duration_ms)
        except AuditWriteError as error:
            raise GuardRefusal(str(error)) from error

    async def _record(
        self, principal: Principal, request: GuardedRequest, outcome: Outcome, duration_ms: float
    ) -> None:
        await self.audit.record(
            user=principal.subject,
            client=request.client_name,
            server=request.server,
            tool=request.name,
            arguments=request.arguments,
            outcome=outcome,
            duration_ms=duration_ms,
        )
