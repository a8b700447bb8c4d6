"""Exa filtering is the agent's discovery hook: config discovery names no product, and the
agent layer (its discovery, loader and session) supplies the Exa filter by default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcpfleet import discover_and_load_mcp_tools, load_all_mcp_configs, open_agent_session
from mcpfleet.config import ServerConfig
from mcpfleet.config import load_all_mcp_configs as discover_configs
from mcpfleet.paths import user_config_file

EXA_SEARCH = {"url": "https://mcp.exa.ai/mcp?exaApiKey=the-key"}


def write_user_servers(servers: dict[str, object]) -> None:
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))


def test_config_discovery_knows_no_product_and_applies_the_hosts_filter(tmp_path: Path) -> None:
    write_user_servers({"search": EXA_SEARCH, "local": {"command": "local-server"}})
    assert set(discover_configs(tmp_path).configs) == {"search", "local"}

    def no_local_servers(config: ServerConfig) -> str | None:
        return "the host runs local servers itself" if config.transport == "stdio" else None

    result = discover_configs(tmp_path, entry_filter=no_local_servers)
    assert set(result.configs) == {"search"}
    [local] = [entry for entry in result.entries if entry.name == "local"]
    assert (local.state, local.reason) == ("filtered", "the host runs local servers itself")
    assert local.config is not None and local.config.cwd is not None  # resolved before the host looked


def test_the_agents_discovery_filters_exa_by_default_and_returns_its_keys(tmp_path: Path) -> None:
    write_user_servers({"search": EXA_SEARCH})
    filtered = load_all_mcp_configs(tmp_path)
    assert filtered.configs == {}
    assert filtered.exa_api_keys == ["the-key"]
    kept = load_all_mcp_configs(tmp_path, filter_exa=False)
    assert set(kept.configs) == {"search"}
    assert kept.exa_api_keys == ["the-key"]


@pytest.mark.anyio
async def test_the_loader_and_the_session_supply_the_exa_filter(tmp_path: Path) -> None:
    write_user_servers({"search": EXA_SEARCH})
    loaded = await discover_and_load_mcp_tools(tmp_path, cache=None)
    assert loaded.manager is not None
    await loaded.manager.aclose()
    assert (loaded.errors, loaded.connected_servers, loaded.exa_api_keys) == ([], [], ["the-key"])
    async with open_agent_session(tmp_path, cache=None) as session:
        assert session.mcp_errors == []
        assert session.mcp_manager.get_all_server_names() == []
        reloaded = await session.reload_mcp()
        assert reloaded.exa_api_keys == ["the-key"]
