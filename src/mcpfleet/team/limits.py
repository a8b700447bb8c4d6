"""Per-user rate limits (``limits:`` in the team file): a ``CallHooks`` of the team guard.

Each ``tools/call`` an allowed user makes is counted in the current minute, once under the user
(``per_user``: every tool together) and once under the user and the tool (``per_tool``: the
first glob that matches the tool sets its limit). Past a limit the call does not reach the
backend: it is answered with an ``MCP error:`` that says which limit, that it is the HTTP 429 of
MCP, and when the minute starts again. The counters are the shared state's (``team.shared``): in
Redis they hold across every replica; without ``state.redis`` (one replica) they live in the
gateway's memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcpfleet.gateway.guard import ALLOWED, CallOutcome, GuardedRequest, Permit

if TYPE_CHECKING:
    from mcpfleet.team.model import Limits
    from mcpfleet.team.principal import Principal
    from mcpfleet.team.shared import TeamShared


class LimitHooks:
    """``limits:`` on every tool call (see the module); ``update`` on a reload."""

    def __init__(self, limits: Limits, shared: TeamShared) -> None:
        self.limits = limits
        self.shared = shared

    def update(self, limits: Limits) -> None:
        self.limits = limits

    async def denied(self, principal: Principal, request: GuardedRequest, refusal: str) -> None:
        return None

    async def permit(self, principal: Principal, request: GuardedRequest) -> Permit:
        if request.kind != "tools":
            return ALLOWED
        limits = self.limits
        user = principal.subject
        if limits.per_user is not None:
            made = await self.shared.count(f"user:{user}")
            if made > limits.per_user:
                return self._refused(principal, limits.per_user, "every tool", "limits.per_user")
        tool_limit = limits.tool_limit(request.server, request.name)
        if tool_limit is not None:
            glob, calls = tool_limit
            made = await self.shared.count(f"tool:{user}:{request.server}/{request.name}")
            if made > calls:
                what = f"{request.server}/{request.name}"
                return self._refused(principal, calls, what, f'limits.per_tool."{glob}"')
        return ALLOWED

    def _refused(self, principal: Principal, calls: int, what: str, key: str) -> Permit:
        return Permit(
            refusal=(
                f"rate limit (429 Too Many Requests): {principal.policy_name} may make {calls} calls "
                f"a minute to {what} ({key} of the team file); try again in {self.shared.seconds_left()} s"
            )
        )

    async def finished(
        self, principal: Principal, request: GuardedRequest, outcome: CallOutcome, duration_ms: float
    ) -> None:
        return None
