"""The per-user servers' side of the gateway's guard (``gateway.guard``): where a request for a
``"credentials": "per-user"`` server goes.

``per_user_permit`` is what the team guard's ``before`` answers for such a server: the caller's
own backend (``UserBackend``: their connection, opened with their token), or, when they hold no
credentials for it, the ``/connect/<server>`` link, as a URL-mode elicitation (``-32042``) to a
client that declared ``elicitation.url`` and as the refusal's text (an ``MCP error:``) to any
other. No request for a per-user server ever reaches the gateway's shared fleet.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mcpfleet.gateway.guard import GuardedRequest, Permit
from mcpfleet.team.connect_flow import ConnectRequiredError, connect_elicitation
from mcpfleet.team.per_user import PerUserCredentials
from mcpfleet.team.principal import principal_of_scope

if TYPE_CHECKING:
    from mcpfleet.client.connection import ProgressCallback


class UserBackend:
    """One user's own connections to the per-user servers (a ``GuardedBackend``)."""

    def __init__(self, credentials: PerUserCredentials, user: str) -> None:
        self.credentials = credentials
        self.user = user

    async def call_tool(
        self,
        server_name: str,
        tool_name: str,
        arguments: dict[str, Any],
        *,
        timeout_ms: int | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> Any:
        async with self.credentials.use(self.user, server_name) as connection:
            return await connection.call_tool(
                tool_name, arguments, timeout_ms=timeout_ms, on_progress=on_progress
            )

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]:
        async with self.credentials.use(self.user, server) as connection:
            return await connection.read_resource(uri)

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, str] | None = None
    ) -> dict[str, Any]:
        async with self.credentials.use(self.user, server) as connection:
            return await connection.get_prompt(name, arguments)


async def per_user_permit(credentials: PerUserCredentials, request: GuardedRequest) -> Permit | None:
    """The permit of a request for a per-user server (``None`` for any other server: the rest of
    the guard decides). Raises the URL-mode elicitation for a client that can show one."""
    if request.server not in credentials.servers:
        return None
    principal = principal_of_scope(request.asker.scope or {})
    if principal is None:
        # The identity check lets nobody through without one; this is the last line.
        return Permit(refusal=f'MCP server "{request.server}" uses each caller\'s own account; sign in first')
    user = principal.credentials_key
    if not await credentials.store(user, request.server).has_tokens():
        needed = ConnectRequiredError(request.server, credentials.connect_link(request.server, principal))
        if declares_url_elicitation(request.client_capabilities):
            raise connect_elicitation(needed)
        return Permit(refusal=str(needed))
    return Permit(backend=UserBackend(credentials, user))


def declares_url_elicitation(capabilities: Mapping[str, Any]) -> bool:
    elicitation = capabilities.get("elicitation")
    return isinstance(elicitation, Mapping) and isinstance(elicitation.get("url"), Mapping)


__all__ = ["UserBackend", "declares_url_elicitation", "per_user_permit"]
