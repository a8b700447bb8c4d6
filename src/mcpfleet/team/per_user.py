"""Per-user upstream credentials of a team gateway, in one object: ``PerUserCredentials``.

It ties together the sealed rows (``team.credentials``), the connect flows
(``team.connect_flow``), the per-user connections (``team.user_connections``) and the pages a
user opens in a browser (``team.connect_pages``): what the gateway's call path and its HTTP app
need of per-user servers, and nothing else.

Where the pages live: ``/connect`` (the user's per-user servers, connected or not, each with a
revoke button), ``/connect/<server>`` (one server: its state, "Connect") and
``/connect/<server>/callback`` (where the upstream's authorization server sends the browser
back). Their URLs are built on the origin of the team file's ``public_url``. The link a call
answers with carries a pass for its caller (``team.connect_passes``), so the browser that opens
it is signed in to them.

Across replicas (``team.shared``): a pass opens once on any of them, a connect's callback is
finished by the replica that runs the flow wherever it lands (``team.connect_handoff``), and a new
connect or a revoke tells every replica (``credentials_changed``) to close its connection of that
user to that server, so the next call there opens one with what the durable state holds now.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit

import anyio

from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import ConfigError
from mcpfleet.team.connect_flow import ConnectFlows
from mcpfleet.team.connect_passes import CONNECT_PATH, ConnectPasses
from mcpfleet.team.credentials import SealedCredentialStore
from mcpfleet.team.principal import Principal
from mcpfleet.team.sealing import Sealer
from mcpfleet.team.shared import LocalShared, SharedMessage, TeamShared
from mcpfleet.team.state import TeamState
from mcpfleet.team.user_connections import IDLE_TIMEOUT_S, UserConnections

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection

logger = logging.getLogger(__name__)


class PerUserCredentials:
    """Everything per-user servers need: ``async with PerUserCredentials.running(…) as credentials``.

    ``use(user, server)`` is the call path's one entry (the user's own connection, or
    ``ConnectRequiredError`` with the link); ``connect_url(server)`` is that link;
    ``team.connect_pages.connect_routes(credentials)`` serves the pages.
    """

    def __init__(
        self,
        state: TeamState,
        sealer: Sealer,
        servers: Mapping[str, ServerConfig],
        *,
        public_url: str,
        flows: ConnectFlows,
        connections: UserConnections,
        passes: ConnectPasses,
        shared: TeamShared,
    ) -> None:
        self.state = state
        self.sealer = sealer
        self.servers = servers
        self.base_url = _origin(public_url)
        self.flows = flows
        self.connections = connections
        self.passes = passes
        self.shared = shared
        self._form_key = sealer.derived_key("connect form")

    @classmethod
    @asynccontextmanager
    async def running(
        cls,
        state: TeamState,
        sealer: Sealer,
        servers: Mapping[str, ServerConfig],
        *,
        public_url: str,
        cwd: Path,
        shared: TeamShared | None = None,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> AsyncIterator[PerUserCredentials]:
        """The credentials of ``servers`` (the per-user ones, HTTP servers only), their flows and
        connections owned by a task group of their own, all closed on the way out. ``shared``:
        what the replicas share (default: one replica's, in this process)."""
        for name, config in servers.items():
            if config.transport not in ("http", "sse") or not config.url:
                raise ConfigError(
                    f'server "{name}" has "credentials": "per-user" but is not an HTTP server; per-user '
                    "credentials are OAuth tokens of a remote server: give it a url, or drop the setting",
                    server=name,
                )
        shared = shared if shared is not None else LocalShared()
        async with anyio.create_task_group() as group:
            holder: list[PerUserCredentials] = []

            async def on_connected(user: str, server: str) -> None:
                await holder[0].credentials_changed(user, server)

            base_url = _origin(public_url)
            passes = ConnectPasses(sealer, public_url, shared)
            connections = UserConnections(
                group,
                servers,
                store_of=lambda user, server: SealedCredentialStore(state, sealer, user, server),
                connect_link=lambda user, server: passes.link(
                    connect_url_of(base_url, server), Principal(subject=user)
                ),
                redirect_uri=lambda server: callback_url_of(base_url, server),
                cwd=cwd,
                idle_timeout_s=idle_timeout_s,
            )
            flows = ConnectFlows(group, cwd=cwd, on_connected=on_connected, shared=shared, sealer=sealer)
            credentials = cls(
                state,
                sealer,
                servers,
                public_url=public_url,
                flows=flows,
                connections=connections,
                passes=passes,
                shared=shared,
            )
            holder.append(credentials)

            async def on_message(message: SharedMessage) -> None:
                user, server = message.get("user"), message.get("server")
                if (
                    message.get("kind") == "credentials_changed"
                    and isinstance(user, str)
                    and isinstance(server, str)
                ):
                    # Not in the listener, which carries every message: closing waits for the end.
                    group.start_soon(connections.close, user, server, name="mcpfleet per-user close")

            shared.listen(on_message)
            group.start_soon(connections.run_idle_reaper, name="mcpfleet per-user idle reaper")
            try:
                yield credentials
            finally:
                with anyio.CancelScope(shield=True):
                    await connections.aclose()
                group.cancel_scope.cancel()

    def store(self, user: str, server: str) -> SealedCredentialStore:
        return SealedCredentialStore(self.state, self.sealer, user, server)

    @asynccontextmanager
    async def use(self, user: str, server: str) -> AsyncIterator[ServerConnection]:
        """``user``'s own connection to the per-user ``server`` for one call (``ConnectRequiredError``
        without usable credentials): ``async with credentials.use(user, server) as connection:``."""
        async with self.connections.use(user, server) as connection:
            yield connection

    def connect_url(self, server: str) -> str:
        return connect_url_of(self.base_url, server)

    def connect_link(self, server: str, principal: Principal) -> str:
        """The link a call of ``principal`` answers with: the connect page, with their pass."""
        return self.passes.link(self.connect_url(server), principal)

    def callback_url(self, server: str) -> str:
        return callback_url_of(self.base_url, server)

    async def connected_servers(self, user: str) -> list[str]:
        """The per-user servers ``user`` holds tokens for, sorted."""
        stored = await self.state.credential_servers(user)
        return [
            server
            for server in stored
            if server in self.servers and await self.store(user, server).has_tokens()
        ]

    async def revoke(self, user: str, server: str) -> bool:
        """Close ``user``'s connection to ``server``, ask the upstream to revoke their tokens
        (when it can) and forget them; ``True`` when there were some. The next call asks the
        user to connect again."""
        await self.connections.close(user, server)
        await self.store(user, server).revoke_upstream()
        deleted = await self.state.delete_credential(user, server)
        await self.shared.publish({"kind": "credentials_changed", "user": user, "server": server})
        return deleted

    async def credentials_changed(self, user: str, server: str) -> None:
        """``user`` holds new tokens for ``server``: the connections opened with the old ones
        close, here and on every other replica."""
        await self.connections.close(user, server)
        await self.shared.publish({"kind": "credentials_changed", "user": user, "server": server})

    def form_token(self, user: str) -> str:
        """The token the pages' forms carry: bound to the user, so another site cannot post them."""
        return hmac.new(self._form_key, user.encode(), hashlib.sha256).hexdigest()

    def form_token_matches(self, user: str, token: str) -> bool:
        return hmac.compare_digest(self.form_token(user), token)


def connect_url_of(base_url: str, server: str) -> str:
    return f"{base_url}{CONNECT_PATH}/{quote(server, safe='')}"


def callback_url_of(base_url: str, server: str) -> str:
    return f"{connect_url_of(base_url, server)}/callback"


def _origin(public_url: str) -> str:
    parts = urlsplit(public_url)
    return f"{parts.scheme}://{parts.netloc}"


__all__ = ["CONNECT_PATH", "PerUserCredentials", "callback_url_of", "connect_url_of"]
