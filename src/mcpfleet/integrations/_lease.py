"""The session an integration serves from: borrowed from the caller, or opened and owned.

Every integration takes ``session=`` (an ``AgentSession`` the caller runs) or ``cwd=`` (a
project folder, discovered as ``open_agent_session`` does, with the same keywords). Only the
second one is the integration's to start and to close. Frameworks enter their tool holders
more than once (Pydantic AI enters a toolset around every run, inside the caller's own
``async with``), so the lease counts entries: the fleet starts at the first and closes at the
last, and a run in the middle of the caller's block reuses the caller's connections.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

import anyio

from mcpfleet.agent.session import AgentSession, Tool, open_agent_session
from mcpfleet.client.opening import CONNECTION_MODULE, import_now
from mcpfleet.fleet.tools import ToolResult

if TYPE_CHECKING:
    from mcpfleet.client.connection import ElicitationHandler, SamplingHandler
    from mcpfleet.fleet.cache import MCPToolCache
    from mcpfleet.fleet.manager import MCPManager, UncachedPolicy


class SessionOptions(TypedDict, total=False):
    """The keywords of ``open_agent_session``, used when an integration opens the session."""

    enable_mcp: bool
    enable_project_config: bool
    trust_project: bool
    startup_timeout_ms: int
    on_uncached: UncachedPolicy
    cache: MCPToolCache | Literal["default"] | None
    extra_config_paths: Sequence[str | Path]
    mcp_manager: MCPManager | None
    tools: Iterable[Tool]
    watch: bool
    elicitation_handler: ElicitationHandler | None
    sampling_handler: SamplingHandler | None


class SessionLease:
    """An ``AgentSession`` held for an integration, opened on first entry when it is owned."""

    def __init__(
        self,
        integration: str,
        session: AgentSession | None,
        cwd: str | Path | None,
        options: SessionOptions,
    ) -> None:
        if (session is None) == (cwd is None):
            raise TypeError(
                f"{integration} needs exactly one of session= (an AgentSession you run) "
                "or cwd= (a project folder to discover servers in)"
            )
        if session is not None and options:
            raise TypeError(
                f"{integration}: the options {sorted(options)} only apply with cwd=; "
                "pass them to open_agent_session for the session you give"
            )
        if cwd is not None and options.get("enable_mcp", True):
            # The fleet will run in this process: the SDK's client is loaded now, with the
            # integration's object, before the framework's first run. Left to the first
            # connection (the fleet's default, see ``client.opening``), its import (0.6-1.4 s)
            # would hold back every handshake of the first start, competing with the framework's
            # own first-run imports, and a warm start would wait for it instead of the gate. A
            # borrowed session loads it itself, or never: one of the daemon's needs no SDK here.
            import_now(CONNECTION_MODULE)
        self._integration = integration
        self._session = session
        self._cwd = cwd
        self._options = options
        self._entries = 0
        self._running: AsyncExitStack | None = None
        self._lock = anyio.Lock()

    @property
    def owned(self) -> bool:
        """True when the lease opened the session and will close it."""
        return self._cwd is not None

    async def enter(self) -> AgentSession:
        """Count one more user; the first one of an owned lease discovers and connects the fleet."""
        async with self._lock:
            if self._session is not None and not self.owned:
                self._entries += 1
                return self._session
            if self._running is None:
                # A failed start leaves nothing open: the session closes what it had started.
                stack = AsyncExitStack()
                assert self._cwd is not None
                self._session = await stack.enter_async_context(
                    open_agent_session(self._cwd, **self._options)
                )
                self._running = stack
            self._entries += 1
            assert self._session is not None
            return self._session

    async def exit(self) -> None:
        """Count one user less; the last one of an owned lease closes every server it started."""
        async with self._lock:
            if self._entries == 0:
                return
            self._entries -= 1
            if self._entries or self._running is None:
                return
            running, self._running = self._running, None
            self._session = None
            # Closed in the task and scope that opened it: the fleet's task group must be left
            # from where it was entered, so no shielding scope may stand in between.
            await running.aclose()

    @property
    def session(self) -> AgentSession:
        """The session, once entered; a clear error when the integration is used before that."""
        if self._session is None:
            raise RuntimeError(
                f"{self._integration} has not started its MCP servers: "
                f"use `async with {self._integration}(cwd=...)` first"
            )
        return self._session

    def tools(self) -> list[Tool]:
        """The session's active tools now (a ``tools/list_changed`` shows up on the next call)."""
        return self.session.tools

    async def call(self, name: str, arguments: dict[str, object] | None) -> ToolResult:
        """Call a tool by the name the session gives it, looked up at call time.

        Looking it up again (rather than keeping the listed object) means a deferred tool whose
        server has since connected is called through its live replacement, and a tool that went
        away answers with an error result the model can read instead of a stale call.
        """
        tool = self.session.get_tool(name)
        if tool is None:
            message = f"MCP error: no tool named {name!r} any more: list the tools again for those available"
            return ToolResult(content=[{"type": "text", "text": message}], text=message, is_error=True)
        return await tool.execute(dict(arguments or {}))
