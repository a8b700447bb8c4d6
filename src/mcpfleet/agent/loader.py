"""The facade an agent session calls at start-up: discovery as the agent sees it, then tools.

``discover_and_load_mcp_tools`` runs discovery and the fleet's connect round and turns
the result into loaded tools with a path that says where each came from. It never
raises for a bad discovered file or a bad server: a discovery crash becomes one
synthetic ``.mcp.json`` error and no tools, a server failure becomes that server's
error. Only an explicit ``--config`` file that cannot be used is a hard error.

The agent layer is the host that supplies discovery's ``entry_filter``: Exa servers are
left out by default (``filter_exa``) and their API keys returned for the native integration.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

from mcpfleet.config import ApprovalStore, DiscoveryResult, EntryFilter
from mcpfleet.config import load_all_mcp_configs as discover_configs
from mcpfleet.config.entry_filters import named_entry_filter
from mcpfleet.config.exa import exa_api_keys
from mcpfleet.contract.defaults import STARTUP_TIMEOUT_MS
from mcpfleet.contract.wire import EXA_ENTRY_FILTER
from mcpfleet.errors import ConfigError, Failure
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.manager import AnyTool, MCPManager, UncachedPolicy

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedTool:
    """One MCP tool with the place it was loaded from."""

    path: str
    """``mcp:<server> via <provider display name>`` (``mcp:<tool name>`` when unknown)."""
    resolved_path: str
    """``mcp:<tool name>``."""
    tool: AnyTool


LoadError = Failure
"""The loader's former name for a failure (``path`` and ``error`` still read the same)."""


@dataclass
class MCPToolsLoadResult:
    tools: list[LoadedTool] = field(default_factory=list)
    errors: list[Failure] = field(default_factory=list)
    manager: MCPManager | None = None
    connected_servers: list[str] = field(default_factory=list)
    exa_api_keys: list[str] = field(default_factory=list)


@dataclass
class AgentDiscoveryResult(DiscoveryResult):
    """Discovery as the agent sees it: the servers, plus the keys for its native Exa integration."""

    exa_api_keys: list[str] = field(default_factory=list)


def agent_entry_filters(filter_exa: bool) -> tuple[str, ...]:
    """The discovery filters the agent layer asks for, by name (``contract.wire.ENTRY_FILTERS``):
    its Exa filter, unless turned off. A fleet the daemon runs is told these as data."""
    return (EXA_ENTRY_FILTER,) if filter_exa else ()


def agent_entry_filter(filter_exa: bool) -> EntryFilter | None:
    """The discovery hook the agent layer supplies: its Exa filter, unless turned off."""
    return named_entry_filter(agent_entry_filters(filter_exa))


def load_all_mcp_configs(
    cwd: str | os.PathLike[str],
    *,
    enable_project_config: bool = True,
    filter_exa: bool = True,
    extra_config_paths: Sequence[str | os.PathLike[str]] = (),
    trust_project: bool = False,
    approvals: ApprovalStore | None = None,
) -> AgentDiscoveryResult:
    """Discover every MCP server configured for the project at ``cwd``, as an agent does.

    ``mcpfleet.config.load_all_mcp_configs`` with the agent's Exa filter: an Exa server that
    only offers the native tool is ``filtered`` (``filter_exa=False`` keeps it), and every
    Exa API key found is in ``exa_api_keys``. Raises ``ConfigError`` only for an
    ``extra_config_paths`` file that is missing or malformed.
    """
    discovery = discover_configs(
        cwd,
        enable_project_config=enable_project_config,
        entry_filter=agent_entry_filter(filter_exa),
        extra_config_paths=extra_config_paths,
        trust_project=trust_project,
        approvals=approvals,
    )
    found = {item.name: getattr(discovery, item.name) for item in fields(discovery)}
    return AgentDiscoveryResult(**found, exa_api_keys=exa_api_keys(discovery))


def loaded_tool(manager: MCPManager, tool: AnyTool) -> LoadedTool:
    provider = manager.get_provider_name(tool.server_name)
    path = f"mcp:{tool.server_name} via {provider}" if provider else f"mcp:{tool.name}"
    return LoadedTool(path=path, resolved_path=f"mcp:{tool.name}", tool=tool)


async def load_tools_into(manager: MCPManager) -> MCPToolsLoadResult:
    """Run discovery and the connect round on a running manager, isolating every failure."""
    result = MCPToolsLoadResult(manager=manager)
    try:
        outcome = await manager.discover_and_connect()
    except ConfigError:
        # Discovery never raises for a file it found by itself: this is an explicit --config
        # file, asked for by name, and failing loudly is the answer.
        raise
    except Exception as error:
        logger.warning("MCP discovery failed: %s", error, exc_info=True)
        result.errors.append(Failure(".mcp.json", "discovery", str(error) or type(error).__name__))
        return result
    result.tools = [loaded_tool(manager, tool) for tool in outcome.tools]
    result.errors = list(outcome.failures)
    result.connected_servers = outcome.connected_servers
    if manager.last_discovery is not None:
        result.exa_api_keys = exa_api_keys(manager.last_discovery)
    for failure in result.errors:
        logger.info("MCP %s: %s", failure.path, failure.error)
    return result


async def discover_and_load_mcp_tools(
    cwd: str | Path,
    *,
    enable_project_config: bool = True,
    trust_project: bool = False,
    filter_exa: bool = True,
    extra_config_paths: Sequence[str | Path] = (),
    cache: MCPToolCache | Literal["default"] | None = "default",
    startup_timeout_ms: int = STARTUP_TIMEOUT_MS,
    on_uncached: UncachedPolicy = "wait",
) -> MCPToolsLoadResult:
    """Discover, connect behind the gate and load every MCP tool.

    The returned ``manager`` is running: close it with ``await result.manager.aclose()``
    from the same task (the manager owns a task group, and anyio requires that).
    """
    manager = MCPManager(
        cwd,
        cache=cache,
        startup_timeout_ms=startup_timeout_ms,
        on_uncached=on_uncached,
        enable_project_config=enable_project_config,
        trust_project=trust_project,
        entry_filter=agent_entry_filter(filter_exa),
        extra_config_paths=extra_config_paths,
    )
    # Started: the caller owns the manager and closes it with ``aclose()`` (same task).
    _, result = await start_and_load(manager)
    return result


async def start_and_load(manager: MCPManager) -> tuple[AsyncExitStack, MCPToolsLoadResult]:
    """Start ``manager`` and run its start-up round; the stack returned is what closes it.

    If the round raises, the manager is closed before the error propagates, as a plain
    close: the error reaches the caller as it was raised, not wrapped in an exception
    group by the manager's task group.
    """
    running = AsyncExitStack()
    await running.enter_async_context(manager)
    try:
        loaded = await load_tools_into(manager)
    except BaseException:
        await running.aclose()
        raise
    return running, loaded


async def discover_mcp_servers(
    cwd: str | Path,
    *,
    enable_project_config: bool = True,
    trust_project: bool = False,
    startup_timeout_ms: int = STARTUP_TIMEOUT_MS,
) -> MCPToolsLoadResult:
    """The convenience wrapper of the public surface: the loader's result shape."""
    return await discover_and_load_mcp_tools(
        cwd,
        enable_project_config=enable_project_config,
        trust_project=trust_project,
        startup_timeout_ms=startup_timeout_ms,
    )
