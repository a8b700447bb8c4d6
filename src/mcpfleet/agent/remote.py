"""An agent session's MCP tools served by the user's daemon (``open_agent_session(daemon=True)``).

The daemon already runs the fleet, so a session that uses it lists the tools with one
request and has them in milliseconds, instead of starting every server itself. A
``DaemonFleet`` holds one control connection (``agent.remote_client``) for the session's
life: ``watch`` first, then ``tools``, and the tools are listed again at every
``tools_changed`` event; each ``DaemonTool`` is an ``MCPTool`` whose calls go out as ``call``
requests. When the daemon goes away, the connection is made again (starting a daemon if
none runs), the tools listed again, and a call that was running then ends as an error
result that says to retry it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any, Self, TypeGuard

import anyio
from anyio.abc import TaskStatus

from mcpfleet.agent.remote_client import AsyncControlClient
from mcpfleet.client.definitions import ToolDefinition
from mcpfleet.contract.wire import RESTART_CODES, FleetSpec
from mcpfleet.daemon_client.control import DaemonLost, DaemonRefused, DaemonUnavailable, OperationFailed
from mcpfleet.daemon_client.launch import (
    RECONNECT_LIMIT,
    RECONNECT_PAUSE_S,
    RECONNECT_WINDOW_S,
    no_daemon_listens,
    stopped_while,
)
from mcpfleet.errors import Failure
from mcpfleet.fleet.tools import MCPTool, ToolResult, _details

logger = logging.getLogger(__name__)

READY_WAIT_S = 15.0
"""How long a call waits for the connection to come back before it fails."""

StartDaemon = Callable[[], object]
"""Starts the daemon and returns once it accepts connections (``launch.start_daemon``)."""


class DaemonTool(MCPTool):
    """A tool of the daemon's fleet: listed by its ``tools`` request, called by ``call``."""

    def __init__(self, fleet: DaemonFleet, row: Mapping[str, Any]) -> None:
        schema = row.get("input_schema")
        definition = ToolDefinition(
            name=str(row["mcp_name"]),
            description=str(row.get("description") or "") or None,
            input_schema=dict(schema)
            if isinstance(schema, Mapping)
            else {"type": "object", "properties": {}},
        )
        super().__init__(fleet, str(row["server"]), definition, name=str(row["name"]))

    def _tool_result(self, result: Any, provider: str | None) -> ToolResult:
        # The daemon sends the ``call --json`` document: the call's result, converted there.
        document: Mapping[str, Any] = result
        content = document.get("content")
        return ToolResult(
            content=[block for block in content if isinstance(block, dict)]
            if isinstance(content, list)
            else [],
            text=str(document.get("text") or ""),
            structured=document.get("structured"),
            is_error=bool(document.get("is_error")),
            details=_details(self.server_name, self.mcp_tool_name, provider),
        )


def _names_a_tool(row: object) -> TypeGuard[Mapping[str, Any]]:
    """A ``tools`` row with the names a ``DaemonTool`` needs: any other row is skipped, as one
    bad row must not end the session's connection (nor hide the other tools)."""
    return isinstance(row, Mapping) and all(
        isinstance(row.get(key), str) and row.get(key) for key in ("name", "server", "mcp_name")
    )


def failure_of(row: Mapping[str, Any]) -> Failure:
    """An ``errors`` row of a document as a ``Failure`` (``mcp:<name>`` is a server's)."""
    path, message = str(row.get("path", "")), str(row.get("error", ""))
    if path.startswith("mcp:"):
        return Failure(path.removeprefix("mcp:"), "connect", message)
    return Failure(path, "config", message)


class DaemonFleet(anyio.AsyncContextManagerMixin):
    """The tools of one fleet as the daemon serves it, kept current, and calls to them.

    Entering it connects (starting the daemon with ``start`` when none runs) and lists the
    tools; ``DaemonUnavailable`` when the daemon cannot serve this fleet, so the caller can
    run the fleet itself. Implements ``ToolBackend`` for its ``DaemonTool``s.
    """

    def __init__(self, spec: FleetSpec, *, start: StartDaemon, host: str | None = None) -> None:
        self.tools: list[DaemonTool] = []
        self.errors: list[Failure] = []
        """What could not load, from the daemon's ``tools`` document."""
        self._fleet = spec.to_json()
        self._start = start
        self._host = host
        self._listeners: list[Callable[[], None]] = []
        self._client: AsyncControlClient | None = None
        self._client_changed = anyio.Event()
        """Set (and replaced) whenever ``_client`` changes: what a call waiting for it awaits."""
        self._ended: str | None = None
        """Why every call now fails at once: the session gave up on the daemon, or was left."""

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        try:
            async with anyio.create_task_group() as group:
                await group.start(self._follow)
                try:
                    yield self
                finally:
                    self._end_calls("this agent session has ended: its MCP tools can no longer be called")
                    group.cancel_scope.cancel()
        except BaseExceptionGroup as failures:
            # One error is given back as it was raised, not as a group of one: the first
            # connection's (``DaemonUnavailable``, for the caller to serve in-process), or the
            # block's own, as it would come out of a session of this process.
            if len(failures.exceptions) != 1:
                raise
            raise failures.exceptions[0] from None

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` each time ``tools`` (and ``errors``) were listed again."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    # -- ToolBackend ------------------------------------------------------------------

    def get_provider_name(self, server_name: str) -> str | None:
        return None  # the daemon's tools document does not say which file a server came from

    async def wait_for_connection(self, server_name: str) -> None:
        """Nothing to wait for here: the daemon waits for its server when a call needs it."""

    async def call_tool(
        self, server_name: str, tool_name: str, arguments: dict[str, Any], *, timeout_ms: int | None = None
    ) -> dict[str, Any]:
        """The ``call --json`` document of one call, made by the daemon.

        A call that never reached the daemon (its connection had just ended) is sent again on
        the next connection; one that reached it is not: the tool may have run.
        """
        # ``server/tool`` names the tool whatever served name the daemon gives it now.
        request = {"fleet": self._fleet, "tool": f"{server_name}/{tool_name}", "arguments": arguments}
        try:
            with anyio.fail_after(None if timeout_ms is None else timeout_ms / 1000):
                try:
                    return await (await self._ready_client()).request("call", request)
                except DaemonLost as error:
                    if error.request_sent:
                        raise
                return await (await self._ready_client()).request("call", request)
        except TimeoutError:
            raise TimeoutError(f"{server_name}/{tool_name} did not answer within {timeout_ms} ms") from None
        except DaemonLost as error:
            if not error.request_sent:
                raise
            raise DaemonLost(stopped_while("call"), request_sent=True) from error

    # -- the connection ---------------------------------------------------------------

    async def _ready_client(self) -> AsyncControlClient:
        """The open connection; while there is none, wait (bounded) for the next one."""
        with anyio.move_on_after(READY_WAIT_S):
            while self._ended is None:
                client = self._client
                if client is not None and not client.closed:
                    return client
                await self._client_changed.wait()
        raise DaemonUnavailable(
            self._ended or "the mcpfleet daemon is not reachable: it is being reconnected"
        )

    def _set_client(self, client: AsyncControlClient | None) -> None:
        self._client = client
        changed, self._client_changed = self._client_changed, anyio.Event()
        changed.set()

    def _end_calls(self, reason: str) -> None:
        """Make every call fail at once with ``reason``, those waiting for a connection too."""
        self._ended = reason
        self._set_client(None)

    async def _follow(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Stay connected for the fleet's life: watch, list, list again at each change.

        The first connection's failure is the caller's (raised from ``start``); later ones
        are retried a few times, then the tools stay as they were and calls fail.
        """
        losses: list[float] = []
        started = False
        while True:
            try:
                async with AsyncExitStack() as stack:
                    client = await self._open(stack)
                    # Watch before listing: a change in between is then not missed.
                    await client.request("watch", {"fleet": self._fleet})
                    await self._list_tools(client)
                    self._set_client(client)
                    if not started:
                        started = True
                        task_status.started()
                    async for event in client.events:
                        if event.name == "tools_changed":
                            await self._list_again(client)
                    reason = "the daemon closed the connection"
            except (DaemonUnavailable, OperationFailed) as error:
                if not started:
                    if isinstance(error, DaemonUnavailable):
                        raise
                    raise DaemonUnavailable(f"the daemon cannot list this fleet's tools: {error}") from error
                reason = str(error)
            finally:
                self._set_client(None)
            now = anyio.current_time()
            losses = [*(moment for moment in losses if now - moment < RECONNECT_WINDOW_S), now]
            if len(losses) > RECONNECT_LIMIT:
                gave_up = (
                    f"the mcpfleet daemon went away {len(losses)} times within {RECONNECT_WINDOW_S:.0f} s "
                    f"(last: {reason}); this session no longer reaches it"
                )
                logger.warning("%s: its MCP tools stay as they were and calls fail", gave_up)
                self._end_calls(gave_up)
                return
            logger.warning("the mcpfleet daemon went away (%s): connecting again", reason)
            await anyio.sleep(RECONNECT_PAUSE_S)

    async def _open(self, stack: AsyncExitStack) -> AsyncControlClient:
        """A connection that said hello, starting a daemon when none runs or one is leaving."""
        started = False
        while True:
            try:
                return await stack.enter_async_context(AsyncControlClient.connect(host=self._host))
            except DaemonRefused as refusal:
                if refusal.code not in RESTART_CODES or started:
                    raise
            except DaemonUnavailable as error:
                none_runs = no_daemon_listens(error.__cause__)
                if not none_runs or started:
                    raise
            started = True
            try:
                await anyio.to_thread.run_sync(self._start)
            except OSError as error:
                raise DaemonUnavailable(f"the mcpfleet daemon could not be started: {error}") from error

    async def _list_again(self, client: AsyncControlClient) -> None:
        """After a change: a fleet the daemon cannot list now (a config file broken by an
        edit) keeps the tools it had, as an in-process reload keeps its servers."""
        try:
            await self._list_tools(client)
        except OperationFailed as failure:
            logger.warning("the mcpfleet daemon could not list the changed tools: %s", failure)

    async def _list_tools(self, client: AsyncControlClient) -> None:
        document = await client.request("tools", {"fleet": self._fleet})
        self.tools = [DaemonTool(self, row) for row in document.get("tools", []) if _names_a_tool(row)]
        self.errors = [failure_of(row) for row in document.get("errors", []) if isinstance(row, Mapping)]
        for listener in list(self._listeners):
            listener()
