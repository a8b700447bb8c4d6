"""An agent session's view of the fleet: its tool registry kept in step with the manager.

The session registers MCP tools under ``mcp_<server>_<tool>`` names next to the host's
own tools, swaps every MCP tool at once when the fleet changes, follows late connections
and ``tools_changed`` events by itself (a server's ``tools/list_changed``, a reconnection,
a watched config edit), and lets sub-agents share the parent's connections.

A session's life is one ``async with``: ``open_agent_session(cwd)`` builds it, entering
it discovers and connects the fleet, leaving it closes every server. With ``daemon=True``
the fleet is the user's daemon's (``mcpfleet.agent.remote``): the session lists its tools
there and follows their changes, and leaving it closes nothing but the connection.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from mcpfleet.agent.loader import agent_entry_filters, load_tools_into, start_and_load
from mcpfleet.config.exa import exa_api_keys, exa_entry_filter
from mcpfleet.contract.defaults import STARTUP_TIMEOUT_MS
from mcpfleet.errors import ConfigError, Failure, ToolNotFoundError
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.manager import AnyTool, ManagerEvent, MCPLoadResult, MCPManager, UncachedPolicy
from mcpfleet.fleet.tools import ToolResult, resolve_tool_name

if TYPE_CHECKING:
    from types import TracebackType

    from mcpfleet.client.connection import ElicitationHandler, SamplingHandler
    from mcpfleet.client.inbound import RootsOffer

logger = logging.getLogger(__name__)

MCP_TOOL_PREFIX = "mcp_"

CatalogListener = Callable[[str], Awaitable[None] | None]
"""Called with the server's name when its resources (or prompts) list changed."""


class RemoteFleet(Protocol):
    """MCP tools served by another process (the daemon), kept current there."""

    @property
    def tools(self) -> Sequence[AnyTool]: ...

    @property
    def errors(self) -> list[Failure]: ...

    def subscribe(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` whenever ``tools`` changed; returns the unsubscribe function."""
        ...


class Tool(Protocol):
    """What the session needs of any tool, MCP or the host's own."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters(self) -> dict[str, Any]: ...

    async def execute(self, arguments: dict[str, Any] | None = None) -> ToolResult: ...


class ToolRegistry:
    """Every tool the session knows, and which of them are active (offered to the model)."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._active: set[str] = set()
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool, *, active: bool = True) -> None:
        self._tools[tool.name] = tool
        if active:
            self._active.add(tool.name)

    def unregister(self, name: str) -> None:
        self._tools.pop(name, None)
        self._active.discard(name)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def set_active(self, names: Iterable[str]) -> None:
        self._active = {name for name in names if name in self._tools}

    def active_tools(self) -> list[Tool]:
        return [self._tools[name] for name in sorted(self._active)]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


class AgentSession:
    """One agent's tools, with the MCP part kept in step with an ``MCPManager``.

    With ``owns_manager``, the manager's life is the session's: entering the session
    starts the manager and runs discovery and the connect round, leaving it closes every
    server. A session built around someone else's manager only follows it. A session
    given a ``remote`` fleet (the daemon's) has no manager: it follows that fleet's tools.
    """

    def __init__(
        self,
        cwd: Path,
        *,
        manager: MCPManager | None,
        owns_manager: bool,
        tools: Iterable[Tool] = (),
        remote: RemoteFleet | None = None,
    ) -> None:
        self.cwd = cwd
        self.tool_registry = ToolRegistry(tools)
        self.mcp_errors: list[Failure] = []
        self._manager = manager
        self._remote = remote
        self._owns_manager = owns_manager and manager is not None
        self._running_manager: AsyncExitStack | None = None
        """Closes the owned manager; set once entering the session has started it."""
        self._unsubscribe: Callable[[], None] | None = None
        self._closed = False
        self.on_resources_changed: CatalogListener | None = None
        """Set by the host to learn that a server's resources changed (``resources/list_changed``)."""
        self.on_prompts_changed: CatalogListener | None = None
        """Set by the host to learn that a server's prompts changed (``prompts/list_changed``)."""
        if manager is not None:
            self._unsubscribe = manager.subscribe(self._on_manager_event)
        elif remote is not None:
            self._follow_remote()
            self._unsubscribe = remote.subscribe(self._follow_remote)

    # -- lifetime -------------------------------------------------------------------

    async def __aenter__(self) -> AgentSession:
        """Start the fleet this session owns: discovery, then the gated connect round.

        A failure there (an explicit ``--config`` file that cannot be used, a cancellation)
        closes what was started before it propagates.
        """
        manager = self._manager
        if manager is None or not self._owns_manager or self._running_manager is not None or self._closed:
            return self
        self._running_manager, loaded = await start_and_load(manager)
        for error in loaded.errors:
            logger.warning("MCP tool load failed: %s: %s", error.path, error.error)
        self.mcp_errors = loaded.errors
        self._install_mcp_tools(manager.get_tools())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop following the manager; shut it down only when this session started it."""
        if self._closed:
            return
        self._closed = True
        if self._unsubscribe is not None:
            self._unsubscribe()
        running, self._running_manager = self._running_manager, None
        if running is not None:
            await running.aclose()

    def _require_started(self) -> None:
        if self._owns_manager and self._running_manager is None and not self._closed:
            raise RuntimeError(
                "This agent session has not started its MCP servers: use "
                "`async with open_agent_session(cwd) as session:` (or `async with session:`) first"
            )

    # -- tools ------------------------------------------------------------------------

    @property
    def mcp_manager(self) -> MCPManager:
        if self._remote is not None:
            raise RuntimeError(
                "This session's MCP servers run in the mcpfleet daemon (daemon=True): there is no "
                "MCPManager in this process; use the session's tools, or open it without daemon=True"
            )
        if self._manager is None:
            raise RuntimeError("MCP is disabled for this session (enable_mcp=False)")
        return self._manager

    @property
    def tools(self) -> list[Tool]:
        """The active tools, MCP ones included."""
        self._require_started()
        return self.tool_registry.active_tools()

    def get_tool(self, name: str) -> Tool | None:
        """A tool by name; MCP tools also by ``server/tool`` or ``mcp__server__tool``."""
        self._require_started()
        tool = self.tool_registry.get(name)
        if tool is not None:
            return tool
        mcp_tools = [t for t in self.tool_registry.active_tools() if _is_mcp_tool(t)]
        return resolve_tool_name(name, mcp_tools)  # type: ignore[arg-type]

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> ToolResult:
        tool = self.get_tool(name)
        if tool is None:
            raise ToolNotFoundError(f"No tool named {name!r}: see the session's tools for what is available")
        return await tool.execute(arguments or {})

    async def refresh_mcp_tools(self, tools: Sequence[AnyTool]) -> None:
        """Replace every MCP tool with ``tools`` and re-activate the set."""
        self._replace_mcp_tools(tools)

    def _replace_mcp_tools(self, tools: Sequence[AnyTool]) -> None:
        previous_active = {t.name for t in self.tool_registry.active_tools()}
        for name in self.tool_registry.names():
            if name.startswith(MCP_TOOL_PREFIX) and _is_mcp_tool(self.tool_registry.get(name)):
                self.tool_registry.unregister(name)
        host_active = {name for name in previous_active if name in self.tool_registry}
        for tool in tools:
            self.tool_registry.register(tool)
        self.tool_registry.set_active(host_active | {tool.name for tool in tools})

    async def wait_for_mcp_server(self, name: str) -> bool:
        """Wait for a server still connecting; rebind its tools once it is up."""
        manager = self.mcp_manager
        await manager.wait_for_connection(name)
        if manager.get_connection_status(name) == "connected":
            await self.refresh_mcp_tools(manager.get_tools())
            return True
        return False

    async def reload_mcp(self, *, full: bool = False) -> MCPLoadResult:
        """``/mcp reload``: rediscover and apply the difference, then refresh the tools.

        Unchanged servers stay connected; ``full=True`` is the seed's cycle: disconnect all,
        discover and connect again. Either way a discovery crash becomes one ``.mcp.json``
        error, as at start-up.
        """
        manager = self.mcp_manager
        if full:
            await manager.disconnect_all()
            loaded = await load_tools_into(manager)
            self.mcp_errors = loaded.errors
            result = MCPLoadResult(
                tools=manager.get_tools(),
                failures=list(loaded.errors),
                connected_servers=loaded.connected_servers,
                exa_api_keys=loaded.exa_api_keys,
            )
        else:
            try:
                result = await manager.reload()
            except ConfigError:
                raise  # an explicit --config file that cannot be used: a hard error, as at start-up
            except Exception as error:
                logger.warning("MCP discovery failed during reload: %s", error, exc_info=True)
                message = str(error) or type(error).__name__
                failure = Failure(".mcp.json", "discovery", message)
                self.mcp_errors = [failure]
                result = MCPLoadResult(
                    tools=manager.get_tools(),
                    failures=[failure],
                    connected_servers=manager.get_connected_servers(),
                )
            else:
                self.mcp_errors = list(result.failures)
                if manager.last_discovery is not None:
                    result.exa_api_keys = exa_api_keys(manager.last_discovery)
        await self.refresh_mcp_tools(manager.get_tools())
        return result

    def create_subagent(self, tools: Iterable[Tool] = ()) -> AgentSession:
        """A child session that shares this session's manager and connections."""
        child = AgentSession(
            self.cwd, manager=self._manager, owns_manager=False, tools=tools, remote=self._remote
        )
        if self._manager is not None:
            child._install_mcp_tools(self._manager.get_tools())
        return child

    def _install_mcp_tools(self, tools: Sequence[AnyTool]) -> None:
        """Register MCP tools without awaiting, while a session is being built."""
        for tool in tools:
            self.tool_registry.register(tool)

    def _follow_remote(self) -> None:
        """Take the remote fleet's tools as they are now (at the start, and at each change)."""
        if self._closed or self._remote is None:
            return
        self.mcp_errors = list(self._remote.errors)
        self._replace_mcp_tools(self._remote.tools)

    def _on_manager_event(self, event: ManagerEvent) -> Awaitable[None] | None:
        """Follow the manager; tool changes are applied before the manager's emitting call returns.

        The registry is swapped synchronously (the manager calls its listeners in place), so
        when ``disconnect_server``, ``disconnect_all`` or a reload returns, the session no
        longer lists a tool that is gone. The host's catalog hooks may be async: their
        awaitable goes back to the manager, which runs it in its task group.
        """
        if self._closed or self._manager is None:
            return None
        if event.kind == "tools_changed":
            self._replace_mcp_tools(self._manager.get_tools())
            return None
        listener = {
            "resources_changed": self.on_resources_changed,
            "prompts_changed": self.on_prompts_changed,
        }.get(event.kind)
        return listener(event.server) if listener is not None else None


def _is_mcp_tool(tool: object) -> bool:
    from mcpfleet.fleet.tools import MCPTool

    return isinstance(tool, MCPTool)


@dataclass(frozen=True, kw_only=True)
class SessionOptions:
    """What a session is opened with besides its folder: the keywords of
    ``open_agent_session`` and ``create_agent_session`` (each field is the keyword of the same
    name, documented there, with its default there), in one record built by those two fronts
    and carried to wherever the session and its manager are made."""

    enable_mcp: bool
    enable_project_config: bool
    trust_project: bool
    startup_timeout_ms: int
    on_uncached: UncachedPolicy
    cache: MCPToolCache | Literal["default"] | None
    extra_config_paths: tuple[str | Path, ...]
    mcp_manager: MCPManager | None
    tools: tuple[Tool, ...]
    watch: bool
    elicitation_handler: ElicitationHandler | None
    sampling_handler: SamplingHandler | None
    roots: RootsOffer

    def manager(self, cwd: str | Path) -> MCPManager:
        """The manager of a session's own fleet at ``cwd`` (not started); Exa servers are left
        to the agent's native integration."""
        return MCPManager(
            cwd,
            cache=self.cache,
            startup_timeout_ms=self.startup_timeout_ms,
            on_uncached=self.on_uncached,
            enable_project_config=self.enable_project_config,
            trust_project=self.trust_project,
            entry_filter=exa_entry_filter,
            extra_config_paths=self.extra_config_paths,
            watch=self.watch,
            elicitation_handler=self.elicitation_handler,
            sampling_handler=self.sampling_handler,
            roots=self.roots,
        )

    def refuse_daemon_incompatible(self) -> None:
        """Refuse, rather than ignore, the options that describe a fleet of this process when
        the fleet is the daemon's (their defaults are fine: the fallback in this process uses
        them)."""
        given = {
            "mcp_manager": self.mcp_manager is not None,
            "cache": self.cache != "default",
            "extra_config_paths": bool(self.extra_config_paths),
            "on_uncached": self.on_uncached != "wait",
            "elicitation_handler": self.elicitation_handler is not None,
            "sampling_handler": self.sampling_handler is not None,
            "roots": self.roots != "working-folder",
        }
        refused = [name for name, is_given in given.items() if is_given]
        if refused:
            raise ValueError(
                f"daemon=True takes the fleet the daemon runs; {', '.join(refused)} "
                "describe a fleet of this process: drop them, or open the session without daemon=True"
            )


def open_agent_session(
    cwd: str | Path,
    *,
    enable_mcp: bool = True,
    enable_project_config: bool = True,
    trust_project: bool = False,
    startup_timeout_ms: int = STARTUP_TIMEOUT_MS,
    on_uncached: UncachedPolicy = "wait",
    cache: MCPToolCache | Literal["default"] | None = "default",
    extra_config_paths: Sequence[str | Path] = (),
    mcp_manager: MCPManager | None = None,
    tools: Iterable[Tool] = (),
    watch: bool = False,
    elicitation_handler: ElicitationHandler | None = None,
    sampling_handler: SamplingHandler | None = None,
    roots: RootsOffer = "working-folder",
    daemon: bool = False,
) -> AbstractAsyncContextManager[AgentSession]:
    """An agent session for the project at ``cwd``, as an async context manager.

    ``async with open_agent_session(cwd) as session:`` discovers and connects the fleet
    (the start-up gate bounds the wait by ``startup_timeout_ms``) and closes every server
    when the block ends, whatever ends it. With ``enable_mcp=False`` there is no fleet. A
    session given ``mcp_manager`` uses it as-is and never closes it. ``watch=True`` reloads
    by diff whenever a discovered config file changes. ``elicitation_handler`` and
    ``sampling_handler`` are the host's answers when a server asks for input during a call
    (``MCPManager``); ``roots`` the roots servers are offered (``MCPManager``: the working
    folder by default, ``None`` for none). Exa servers are left to the agent's native
    integration.

    ``daemon=True`` takes the tools from the user's daemon (started if none runs), which
    keeps the fleet running between sessions: the session has them in milliseconds, follows
    their changes (the daemon watches the config files), and calls them there. It has no
    ``mcp_manager``. When the daemon cannot serve it (it reads other config files than this
    process would), the fleet runs in this process, with a warning logged. The keywords that
    describe a fleet of this process (``mcp_manager``, ``cache``, ``extra_config_paths``,
    ``on_uncached`` and the two handlers), given with ``daemon=True``, raise ``ValueError``.
    """
    options = SessionOptions(
        enable_mcp=enable_mcp,
        enable_project_config=enable_project_config,
        trust_project=trust_project,
        startup_timeout_ms=startup_timeout_ms,
        on_uncached=on_uncached,
        cache=cache,
        extra_config_paths=tuple(extra_config_paths),
        mcp_manager=mcp_manager,
        # A daemon=True session may fall back to a fleet of its own when it is entered: the
        # tools are taken now.
        tools=tuple(tools),
        watch=watch,
        elicitation_handler=elicitation_handler,
        sampling_handler=sampling_handler,
        roots=roots,
    )
    if daemon and enable_mcp:
        options.refuse_daemon_incompatible()
        return _daemon_session(Path(cwd).expanduser().resolve(), options)
    return _entered(_build_session(cwd, options))


@asynccontextmanager
async def _entered(session: AgentSession) -> AsyncIterator[AgentSession]:
    async with session:
        yield session


@asynccontextmanager
async def _daemon_session(cwd: Path, options: SessionOptions) -> AsyncIterator[AgentSession]:
    """A session on the daemon's fleet, or on one of this process (with the same ``options``)
    when the daemon refuses it.

    ``cwd`` is resolved already: what the daemon keys the project by.
    """
    # Only this keyword reaches for the daemon, through its client side (below the agent) and
    # the remote session beside it: nothing of the daemon's serving side is imported.
    from mcpfleet.agent.remote import DaemonFleet
    from mcpfleet.contract.wire import FleetSpec
    from mcpfleet.daemon_client.control import DaemonUnavailable
    from mcpfleet.daemon_client.launch import NO_DAEMON_ENV, daemon_disabled, start_daemon

    spec = FleetSpec(
        cwd=str(cwd),
        trust_project=options.trust_project,
        enable_project_config=options.enable_project_config,
        startup_timeout_ms=options.startup_timeout_ms,
        entry_filters=agent_entry_filters(filter_exa=True),
    )
    async with AsyncExitStack() as stack:
        try:
            if daemon_disabled():
                raise DaemonUnavailable(f"{NO_DAEMON_ENV} is set")
            remote = await stack.enter_async_context(DaemonFleet(spec, start=start_daemon, host=_host_name()))
        except DaemonUnavailable as error:
            logger.warning(
                "the mcpfleet daemon cannot serve this session (%s): its MCP servers run in this process",
                error,
            )
            session = _build_session(cwd, options)
        else:
            session = AgentSession(
                Path(spec.cwd), manager=None, owns_manager=False, tools=options.tools, remote=remote
            )
        await stack.enter_async_context(session)
        yield session


def _host_name() -> str:
    """How the daemon's status names this process: the program that opened the session."""
    import sys

    program = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return f"python {program}".strip()


async def create_agent_session(
    cwd: str | Path,
    *,
    enable_mcp: bool = True,
    enable_project_config: bool = True,
    trust_project: bool = False,
    startup_timeout_ms: int = STARTUP_TIMEOUT_MS,
    on_uncached: UncachedPolicy = "wait",
    cache: MCPToolCache | Literal["default"] | None = "default",
    extra_config_paths: Sequence[str | Path] = (),
    mcp_manager: MCPManager | None = None,
    tools: Iterable[Tool] = (),
    watch: bool = False,
    elicitation_handler: ElicitationHandler | None = None,
    sampling_handler: SamplingHandler | None = None,
    roots: RootsOffer = "working-folder",
) -> AgentSession:
    """The seed's spelling of ``open_agent_session``: ``session = await create_agent_session(cwd)``
    then ``async with session:``. Same keywords.

    Nothing starts until ``async with session`` enters it, so an error between the two
    lines leaves no server running. The risk is the other way round: a session that is
    never entered has no MCP tools, and asking it for tools raises ``RuntimeError`` rather
    than answer with an empty fleet. Prefer ``async with open_agent_session(cwd) as session:``.
    """
    return _build_session(
        cwd,
        SessionOptions(
            enable_mcp=enable_mcp,
            enable_project_config=enable_project_config,
            trust_project=trust_project,
            startup_timeout_ms=startup_timeout_ms,
            on_uncached=on_uncached,
            cache=cache,
            extra_config_paths=tuple(extra_config_paths),
            mcp_manager=mcp_manager,
            tools=tuple(tools),
            watch=watch,
            elicitation_handler=elicitation_handler,
            sampling_handler=sampling_handler,
            roots=roots,
        ),
    )


def _build_session(cwd: str | Path, options: SessionOptions) -> AgentSession:
    """A session, not started: a manager of its own is created here and started on entry."""
    if not options.enable_mcp:
        return AgentSession(Path(cwd), manager=None, owns_manager=False, tools=options.tools)
    if options.mcp_manager is not None:
        borrowed = options.mcp_manager
        session = AgentSession(borrowed.cwd, manager=borrowed, owns_manager=False, tools=options.tools)
        session._install_mcp_tools(borrowed.get_tools())
        return session
    manager = options.manager(cwd)
    return AgentSession(manager.cwd, manager=manager, owns_manager=True, tools=options.tools)
