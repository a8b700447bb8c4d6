"""mcpfleet, the way an agent uses it: ``open_agent_session`` over a config file, tools called
through the session. Runs from the project's virtualenv with HOME pointed at a scratch folder."""

from __future__ import annotations

import json
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from common import main

from mcpfleet import AgentSession, MCPToolCache, open_agent_session

IMPORTED = time.perf_counter()


class AgentSessionFleet:
    """Connects through discovery of one ``--config`` file, like ``mcpfleet --config FILE``."""

    def __init__(self, params: dict[str, Any]) -> None:
        self._work_dir = Path(params["work_dir"])
        cache_path = params.get("cache_path")
        self._cache = MCPToolCache(Path(cache_path)) if cache_path else None
        self._session: AgentSession | None = None
        self._lifetime = AsyncExitStack()
        """The session's ``async with``, spread over ``start`` and ``close``."""
        self.deferred_tools = 0

    async def start(self, servers: list[list[str]]) -> int:
        config_path = self._work_dir / "mcp.json"
        entries = {f"s{index}": {"command": argv[0], "args": argv[1:]} for index, argv in enumerate(servers)}
        config_path.write_text(json.dumps({"mcpServers": entries}))
        self._session = await self._lifetime.enter_async_context(
            open_agent_session(
                self._work_dir,
                enable_project_config=False,
                extra_config_paths=[config_path],
                cache=self._cache,
            )
        )
        if self._session.mcp_errors:
            raise RuntimeError(f"mcpfleet reported errors: {self._session.mcp_errors}")
        return len(self._session.tools)

    async def call(self, server: int, tool: str, message: str) -> str:
        assert self._session is not None
        result = await self._session.call_tool(f"mcp_s{server}_{tool}", {"message": message})
        if result.is_error:
            raise RuntimeError(result.text)
        return result.text

    async def close(self) -> None:
        await self._lifetime.aclose()
        if self._cache is not None:
            self._cache.close()


class PreimportedSDKFleet(AgentSessionFleet):
    """The same, with the SDK imported before the clock starts (what a lazy import costs)."""

    def __init__(self, params: dict[str, Any]) -> None:
        import mcpfleet.client.connection  # noqa: F401  (the SDK import under test)

        super().__init__(params)


class ConnectionCallFleet(AgentSessionFleet):
    """The same session, but calls go straight to the server's connection: no tool lookup, no
    result conversion. Diagnostic only, to split the call overhead between bridge and client."""

    async def call(self, server: int, tool: str, message: str) -> str:
        assert self._session is not None
        connection = self._session.mcp_manager.get_connection(f"s{server}")
        assert connection is not None
        result = await connection.call_tool(tool, {"message": message})
        return str(result.content[0].text)


if __name__ == "__main__":
    main(
        {
            "agent-session": AgentSessionFleet,
            "sdk-preimported": PreimportedSDKFleet,
            "connection-call": ConnectionCallFleet,
        },
        library_imported=IMPORTED,
    )
