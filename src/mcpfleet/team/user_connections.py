"""One backend connection per (user, server) for per-user servers, never shared between users.

A server marked ``"credentials": "per-user"`` is not part of the gateway's shared fleet: each
user who calls it gets a connection of their own, opened with their own token (the
``TeamOAuthProvider`` on their sealed row, which refreshes an expired access token with the
refresh token and seals the new pair). The connection is keyed by ``(credentials_key,
server)``; nothing else can reach it. It is closed when it has been idle for
``idle_timeout_s``, when the user revokes the server, and when a new connect replaces the
user's tokens. A user with no usable credentials gets ``ConnectRequiredError``, whose message
carries the ``/connect/<server>`` link.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.abc

from mcpfleet.client.opening import open_connection
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import AuthRequiredError
from mcpfleet.team.connect_flow import ConnectRequiredError, TeamOAuthProvider
from mcpfleet.team.credentials import SealedCredentialStore

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection

logger = logging.getLogger(__name__)

IDLE_TIMEOUT_S = 300.0
"""A user's connection unused this long is closed (the next call opens it again)."""

UserServer = tuple[str, str]
"""``(Principal.credentials_key, server name)``."""


@dataclass(eq=False)
class _Slot:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    connection: ServerConnection | None = None
    last_used: float = 0.0
    in_use: int = 0
    """Calls on the connection now: a connection is idle only when none is."""


class UserConnections:
    """The per-user connections of one team gateway, their owner tasks in its task group."""

    def __init__(
        self,
        task_group: anyio.abc.TaskGroup,
        servers: Mapping[str, ServerConfig],
        *,
        store_of: Callable[[str, str], SealedCredentialStore],
        connect_link: Callable[[str, str], str],
        redirect_uri: Callable[[str], str],
        cwd: Path,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> None:
        self._task_group = task_group
        self.servers = servers
        self._store_of = store_of
        self._connect_link = connect_link
        self._redirect_uri = redirect_uri
        self._cwd = cwd
        self.idle_timeout_s = idle_timeout_s
        self._slots: dict[UserServer, _Slot] = {}

    @asynccontextmanager
    async def use(self, user: str, server: str) -> AsyncIterator[ServerConnection]:
        """``user``'s own connection to ``server`` for the length of the block (opened now if
        none is open); it is not idle while a block holds it.

        Raises ``ConnectRequiredError`` when the user holds no tokens for it, or when those it
        holds no longer work (refused, and the refresh refused too).
        """
        slot = self._slots.setdefault((user, server), _Slot())
        async with slot.lock:
            if slot.connection is not None and slot.connection.closed:
                slot.connection = None
            if slot.connection is None:
                slot.connection = await self._open(user, server)
            connection = slot.connection
            slot.in_use += 1
        try:
            yield connection
        finally:
            slot.in_use -= 1
            slot.last_used = time.monotonic()

    def open_pairs(self) -> list[UserServer]:
        """The (user, server) pairs with a connection open now, sorted."""
        return sorted(key for key, slot in self._slots.items() if slot.connection is not None)

    def held_pairs(self) -> list[UserServer]:
        """The (user, server) pairs the pool keeps anything for (a connection, or a call waiting
        for one), sorted: what its memory grows with."""
        return sorted(self._slots)

    async def close(self, user: str, server: str) -> bool:
        """Close ``user``'s connection to ``server``; ``True`` when one was open."""
        slot = self._slots.pop((user, server), None)
        if slot is None:
            return False
        async with slot.lock:
            connection, slot.connection = slot.connection, None
        if connection is None:
            return False
        await connection.close()
        return True

    async def close_idle(self) -> int:
        """Close the connections idle for ``idle_timeout_s`` or longer; how many were closed."""
        now = time.monotonic()
        idle = [
            key
            for key, slot in self._slots.items()
            if slot.connection is not None
            and not slot.in_use
            and not slot.lock.locked()
            and now - slot.last_used >= self.idle_timeout_s
        ]
        closed = 0
        for user, server in idle:
            closed += await self.close(user, server)
        # Slots of calls that never got a connection (no credentials yet) are dropped too, so
        # the table holds no more than the pairs in use.
        for key, slot in list(self._slots.items()):
            if slot.connection is None and not slot.in_use and not slot.lock.locked():
                del self._slots[key]
        return closed

    async def run_idle_reaper(self) -> None:
        """Close idle connections, forever (run it in the gateway's task group)."""
        while True:
            await anyio.sleep(max(self.idle_timeout_s / 4, 1.0))
            await self.close_idle()

    async def aclose(self) -> None:
        """Close every per-user connection."""
        for user, server in list(self._slots):
            await self.close(user, server)

    async def _open(self, user: str, server: str) -> ServerConnection:
        store = self._store_of(user, server)
        url = self._connect_link(user, server)
        if not await store.has_tokens():
            raise ConnectRequiredError(server, url)
        auth = TeamOAuthProvider(
            server, self.servers[server], store, redirect_uri=self._redirect_uri(server), connect_url=url
        )
        try:
            return await open_connection(
                self._task_group, server, self.servers[server], cwd=self._cwd, auth=auth
            )
        except ConnectRequiredError:
            raise
        except AuthRequiredError as error:
            # Refused even after a refresh: only a new connect can help.
            raise ConnectRequiredError(server, url) from error


__all__ = ["IDLE_TIMEOUT_S", "UserConnections", "UserServer"]
