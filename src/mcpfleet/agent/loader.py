"""The facade an agent session calls at start-up (S1, S3, S10).

``discover_and_load_mcp_tools`` runs discovery and the fleet's connect round and turns
the result into loaded tools with a path that says where each came from. It never
raises for a bad discovered file or a bad server: a discovery crash becomes one
synthetic ``.mcp.json`` error and no tools, a server failure becomes that server's
error. Only an explicit ``--config`` file that cannot be used is a hard error.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

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
    result.exa_api_keys = outcome.exa_api_keys
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
    startup_timeout_ms: int = 250,
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
        filter_exa=filter_exa,
        extra_config_paths=extra_config_paths,
    )
    return await start_and_load(manager)


async def start_and_load(manager: MCPManager) -> MCPToolsLoadResult:
    """Enter a new manager and run its start-up round; close it again if that raises.

    On success the manager stays running for the caller, who closes it from this task.
    """
    await manager.__aenter__()
    try:
        return await load_tools_into(manager)
    except BaseException:
        await manager.aclose()
        raise


async def discover_mcp_servers(
    cwd: str | Path,
    *,
    enable_project_config: bool = True,
    trust_project: bool = False,
    startup_timeout_ms: int = 250,
) -> MCPToolsLoadResult:
    """The convenience wrapper of the public surface (S20): the loader's result shape."""
    return await discover_and_load_mcp_tools(
        cwd,
        enable_project_config=enable_project_config,
        trust_project=trust_project,
        startup_timeout_ms=startup_timeout_ms,
    )
