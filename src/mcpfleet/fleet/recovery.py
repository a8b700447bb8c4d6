"""Bringing lost servers back, on the rhythm ``fleet.supervision`` decides.

Each registered connection has a watch task. When the connection ends by itself, the
server reports ``failed`` (what happened) then ``reconnecting`` (what is being done), and
is reconnected on the supervisor's ladder while its last tools stay registered: a call
made meanwhile waits, bounded by ``call_wait_s``, for the new connection. Only a stdio
server that trips the crash breaker or exhausts its ladder is left down; its tools then
answer with the reason.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from mcpfleet.errors import ConnectError, ServerNotConnectedError, ServerReconnectingError
from mcpfleet.fleet.registry import STDERR_TAIL_LINES, Attempt, Reconnection, ServerRegistry, ServerSlot
from mcpfleet.fleet.startup import Connector
from mcpfleet.fleet.supervision import Supervisor, is_remote

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection

logger = logging.getLogger(__name__)


class Recovery:
    """Watches registered connections and reconnects the ones that end by themselves."""

    def __init__(self, registry: ServerRegistry, connector: Connector, supervisor: Supervisor) -> None:
        self._registry = registry
        self._connector = connector
        self._supervisor = supervisor

    def watch(self, attempt: Attempt, connection: ServerConnection) -> None:
        """Notice a transport that ends on its own, so status and tools tell the truth."""
        slot = attempt.slot

        async def watch_until_closed() -> None:
            await connection.wait_closed()
            if slot.connection is connection and not slot.is_retired():
                await self._recover(slot, connection)

        self._registry.task_group.start_soon(watch_until_closed, name=f"mcpfleet watch {slot.name}")

    async def wait_for_connection(self, name: str) -> None:
        """Return once ``name`` is connected; raise if it cannot be (bounded by its timeout).

        A server being reconnected is waited for up to the reconnect policy's ``call_wait_s``.
        """
        slot = self._registry.get(name)
        if slot is None:
            raise ServerNotConnectedError(name)
        if slot.connection_status == "connected":
            return
        if slot.recovering:
            await self._wait_for_recovery(slot)
            return
        attempt = slot.attempt
        if attempt is None:
            if slot.error is not None:
                raise ConnectError(slot.error, server=name)
            raise ServerNotConnectedError(name)
        timeout_ms = attempt.config.effective_timeout_ms
        # The attempt is itself bounded by the handshake timeout; this bound only guards
        # against a tools/list that never answers.
        with anyio.move_on_after(2 * timeout_ms / 1000 if timeout_ms else None) as scope:
            await attempt.done.wait()
        if scope.cancelled_caught:
            raise ConnectError(
                f'MCP server "{name}" did not become ready within {2 * timeout_ms}ms', server=name
            )
        if slot.is_retired() or not _connected(slot):
            raise ConnectError(attempt.error or f"MCP server not connected: {name}", server=name)

    async def _wait_for_recovery(self, slot: ServerSlot) -> None:
        bound = self._supervisor.policy.call_wait_s
        with anyio.move_on_after(bound):
            while not slot.is_retired() and slot.recovering and not _connected(slot):
                await self._registry.events.wait_for_change()
        if slot.is_retired():
            raise ConnectError(f"MCP server not connected: {slot.name}", server=slot.name)
        if _connected(slot):
            return
        if slot.recovering:
            raise ServerReconnectingError(
                f'MCP server "{slot.name}" is reconnecting ({slot.error or "connection lost"}); '
                f"it was not back within {bound:g} s, try again shortly",
                server=slot.name,
            )
        raise ConnectError(slot.error or f"MCP server not connected: {slot.name}", server=slot.name)

    async def _recover(self, slot: ServerSlot, lost: ServerConnection) -> None:
        """A registered connection ended by itself: report it, then bring the server back."""
        registry = self._registry
        reason = lost.close_reason or "connection closed"
        message = f'MCP server "{slot.name}" disconnected: {reason}'
        slot.stderr_tail = tuple(lost.stderr_tail(STDERR_TAIL_LINES))
        slot.connection = None
        if not self._supervisor.policy.auto_reconnect:
            registry.fail(slot, message)
            return
        tripped = slot.breaker.record_crash()
        if tripped and not is_remote(slot.config.transport):
            suspension = self._supervisor.suspension_message(slot.name)
            slot.breaker.suspension = suspension
            registry.fail(slot, f"{suspension} (last: {reason})")
            return
        reconnection = slot.reconnection = Reconnection()
        registry.fail(slot, message)
        registry.emit("reconnecting", slot.name, message)
        try:
            with reconnection.scope:
                await self._reconnect(slot, quiet=tripped)
        finally:
            if slot.reconnection is reconnection:
                slot.reconnection = None
            registry.events.notify_change()

    async def _reconnect(self, slot: ServerSlot, *, quiet: bool) -> None:
        attempts = 0
        last_error = "connection lost"
        config = slot.config
        ladder_length = len(self._supervisor.policy.ladder_s)
        for delay in self._supervisor.retry_delays(config.transport, quiet=quiet):
            await anyio.sleep(delay)
            if slot.is_retired():
                return
            attempts += 1
            attempt = slot.attempt = self._connector.new_attempt(slot, reconnect=True)
            await self._connector.run(attempt)
            if slot.is_retired():
                return
            if attempt.error is None:
                logger.info("MCP server %s reconnected (attempt %d)", slot.name, attempts)
                return
            last_error = attempt.error
            slot.error = f'MCP server "{slot.name}" is reconnecting; attempt {attempts} failed: {last_error}'
            if attempts == ladder_length and (quiet or is_remote(config.transport)):
                logger.info("MCP server %s is still unreachable; retrying quietly", slot.name)
        # Only a stdio server's delays run out: respawning it forever could fork-storm the machine.
        self._registry.fail(
            slot,
            f'MCP server "{slot.name}" could not be restarted after {attempts} attempts: {last_error}; '
            f"fix it, then run /mcp reconnect {slot.name}",
        )


def _connected(slot: ServerSlot) -> bool:
    """Read afresh after every ``await`` (a property comparison would be narrowed away)."""
    return slot.connection_status == "connected"
