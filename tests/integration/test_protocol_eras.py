"""Both protocol eras against real servers (B8, B11): the era probed once under a short bound,
remembered in the tool cache, re-probed when the server changed, and the 2026-07-28 client
duties (``input_required`` rounds answered by the host's handlers).

The three interop servers: ``http_server.py --era modern`` (the SDK's own server API,
stateless, refusing ``initialize``), ``http_server.py`` (the SDK's dual-era default) and
``fake_server.py --drop-unknown`` (a legacy stdio server that never answers unknown requests,
so only the probe bound ends the ``server/discover`` wait). What a start cost is read from the
connection (``probed``, ``probe_timed_out``) and the cache row, never from the wall clock.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tests.servers.fixtures import HttpServer, completed, fake_server_config, http_server_factory

import mcpfleet.client.connection  # noqa: F401  (pay the SDK's import before anything is timed)
from mcpfleet.agent.session import create_agent_session
from mcpfleet.client.definitions import LEGACY_ERA, ToolDefinition
from mcpfleet.client.opening import connect_to_server
from mcpfleet.config.model import ServerConfig, SourceInfo, fingerprint_of
from mcpfleet.errors import EraMismatchError
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.manager import MCPManager
from mcpfleet.paths import user_config_file

pytestmark = pytest.mark.anyio

__all__ = ["http_server_factory"]

StartServer = Callable[..., HttpServer]


def fingerprinted(config: ServerConfig) -> ServerConfig:
    return replace(config, fingerprint=fingerprint_of(config))


def http_config(name: str, server: HttpServer) -> ServerConfig:
    return fingerprinted(ServerConfig(name=name, transport="http", url=server.url, timeout_ms=20_000))


def fleet(config: ServerConfig) -> tuple[dict[str, ServerConfig], dict[str, SourceInfo]]:
    return {config.name: config}, {config.name: SourceInfo("mcpfleet", "mcpfleet", "/virtual.json", "user")}


@pytest.fixture
def cache(tmp_path: Path) -> MCPToolCache:
    return MCPToolCache(tmp_path / "tools.sqlite3")


async def start_once(cache: MCPToolCache, config: ServerConfig, **options: Any) -> dict[str, Any]:
    """One agent start: connect, list, call ``echo``; what the connection did, as plain data."""
    async with MCPManager("/", cache=cache, startup_timeout_ms=0, **options) as manager:
        loaded = await manager.connect_servers(*fleet(config))
        assert not loaded.errors, loaded.errors
        connection = manager.get_connection(config.name)
        assert connection is not None
        echo = await manager.call_tool(config.name, "echo", {"message": "hi"})
        assert not echo.is_error
        return {
            "era": connection.era,
            "protocol_version": connection.protocol_version,
            "probed": connection.probed,
            "probe_timed_out": connection.probe_timed_out,
            "stderr": connection.stderr_tail(),
        }


async def test_a_modern_only_server_connects_and_the_next_start_adopts_its_remembered_discover_result(
    http_server_factory: StartServer, cache: MCPToolCache
) -> None:
    config = http_config("modern", http_server_factory("--era", "modern"))
    first = await start_once(cache, config)
    assert first["era"] == "modern" and first["protocol_version"] == "2026-07-28"
    assert first["probed"] and not first["probe_timed_out"]
    remembered = cache.get("modern", config.fingerprint)
    assert remembered is not None and isinstance(remembered.era, dict)
    assert "2026-07-28" in remembered.era["supportedVersions"]

    second = await start_once(cache, config)
    assert second["era"] == "modern" and not second["probed"]


async def test_a_dual_era_server_is_spoken_to_in_the_current_revision(
    http_server_factory: StartServer, cache: MCPToolCache
) -> None:
    config = http_config("dual", http_server_factory())
    first = await start_once(cache, config)
    assert first["era"] == "modern" and first["probed"]
    second = await start_once(cache, config)
    assert second["era"] == "modern" and not second["probed"]


async def test_a_legacy_server_that_drops_unknown_requests_costs_the_probe_bound_once(
    cache: MCPToolCache,
) -> None:
    config = fingerprinted(fake_server_config("quiet", "--drop-unknown", "--tool", "echo"))
    first = await start_once(cache, config, probe_timeout_ms=300)
    assert first["era"] == "legacy" and first["protocol_version"] == "2025-11-25"
    assert first["probed"] and first["probe_timed_out"]
    assert "dropped unknown request server/discover" in first["stderr"]
    remembered = cache.get("quiet", config.fingerprint)
    assert remembered is not None and remembered.era == LEGACY_ERA

    second = await start_once(cache, config, probe_timeout_ms=300)
    assert second["era"] == "legacy" and not second["probed"]
    assert not any("server/discover" in line for line in second["stderr"])


async def test_a_probe_answered_after_its_bound_is_ignored_and_the_handshake_goes_on(tmp_path: Path) -> None:
    """A server still booting reads the probe and ``initialize`` together, late: the probe's
    answer, arriving after the bound, finds no waiter and the handshake is unaffected."""
    config = fake_server_config("booting", "--delay-start", "1.0", "--tool", "echo")
    async with connect_to_server("booting", config, cwd=tmp_path, probe_timeout_ms=200) as connection:
        assert connection.probed and connection.probe_timed_out and connection.era == "legacy"
        echoed = await connection.call_tool("echo", {"message": "still fine"})
        assert echoed.content[0].text == "still fine"  # type: ignore[union-attr]


async def test_a_dual_era_server_too_slow_for_the_probe_is_remembered_modern_from_its_late_answer(
    cache: MCPToolCache,
) -> None:
    config = fingerprinted(
        fake_server_config("slowboot", "--discover", "--delay-start", "1.0", "--tool", "echo")
    )
    first = await start_once(cache, config, probe_timeout_ms=200)
    assert first["era"] == "legacy" and first["probe_timed_out"]
    remembered = cache.get("slowboot", config.fingerprint)
    assert remembered is not None and isinstance(remembered.era, dict)
    second = await start_once(cache, config, probe_timeout_ms=200)
    assert second["era"] == "modern" and not second["probed"]


async def test_a_remembered_legacy_verdict_refused_by_an_upgraded_server_is_probed_again_and_replaced(
    http_server_factory: StartServer, cache: MCPToolCache
) -> None:
    config = http_config("upgraded", http_server_factory("--era", "modern"))
    # What a start wrote while the server still spoke only the handshake era.
    cache.put("upgraded", config.fingerprint, [ToolDefinition("echo")], era=LEGACY_ERA)
    started = await start_once(cache, config)
    assert started["era"] == "modern" and started["probed"]
    replaced = cache.get("upgraded", config.fingerprint)
    assert replaced is not None and isinstance(replaced.era, dict)


async def test_a_remembered_modern_verdict_refused_by_a_downgraded_server_is_probed_again_and_replaced(
    http_server_factory: StartServer, cache: MCPToolCache
) -> None:
    modern = http_server_factory("--era", "modern")
    config = http_config("downgraded", modern)
    await start_once(cache, config)
    modern.stop()
    legacy = http_server_factory("--era", "legacy", "--port", str(modern.port))
    assert legacy.url == config.url

    started = await start_once(cache, config)
    assert started["era"] == "legacy" and started["probed"]
    replaced = cache.get("downgraded", config.fingerprint)
    assert replaced is not None and replaced.era == LEGACY_ERA


async def test_a_refused_remembered_verdict_raises_era_mismatch_without_the_manager(
    http_server_factory: StartServer, tmp_path: Path
) -> None:
    config = http_config("legacy-only", http_server_factory("--era", "legacy"))
    remembered = {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}},
        "resultType": "complete",
    }
    async with connect_to_server("legacy-only", config, cwd=tmp_path, era=remembered) as connection:
        with pytest.raises(EraMismatchError, match="refused the 2026-07-28 protocol remembered for it"):
            await connection.list_tools()


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_input_requests_of_a_call_are_answered_by_the_hosts_handlers_in_both_eras(
    http_server_factory: StartServer, cache: MCPToolCache, tmp_path: Path, era: str
) -> None:
    """On 2026-07-28 the server asks through ``input_required`` rounds, on the handshake era
    through requests during the call: the same host hooks answer both."""
    config = http_config("reviewer", http_server_factory())
    asked: list[str] = []

    async def approve(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(f"elicitation: {request['message']}")
        return {"action": "accept", "content": {"approved": True}}

    async def summarise(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(f"sampling: {request['messages'][0]['content']['text']}")
        return {"role": "assistant", "content": {"type": "text", "text": "all good"}, "model": "host-model"}

    async with connect_to_server(
        "reviewer",
        config,
        cwd=tmp_path,
        era=None if era == "modern" else LEGACY_ERA,
        elicitation_handler=approve,
        sampling_handler=summarise,
    ) as connection:
        assert connection.era == era
        await connection.list_tools()
        result = completed(await connection.call_tool("review", {"topic": "the plan"}))
    assert not result.is_error, result
    text = result.content[0].text  # type: ignore[union-attr]
    assert text == "the plan: approved=True; summary=all good; roots=1"
    assert "elicitation: Approve the review of the plan?" in asked
    assert "sampling: Summarise the plan" in asked


async def test_an_agent_sessions_host_hooks_answer_a_modern_servers_input_required_rounds(
    http_server_factory: StartServer, tmp_path: Path
) -> None:
    server = http_server_factory("--era", "modern")
    write_user_config({"reviewer": {"type": "http", "url": server.url}})

    async def approve(request: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"approved": True}}

    async def summarise(request: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "short"}, "model": "host"}

    session = await create_agent_session(
        tmp_path, cache=None, startup_timeout_ms=0, elicitation_handler=approve, sampling_handler=summarise
    )
    async with session:
        result = await session.call_tool("mcp_reviewer_review", {"topic": "notes"})
    assert not result.is_error, result.text
    assert result.text == "notes: approved=True; summary=short; roots=1"


def write_user_config(servers: dict[str, Any]) -> None:
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))


def test_status_json_reports_each_servers_era_and_protocol_version(
    http_server_factory: StartServer, tmp_path: Path
) -> None:
    server = http_server_factory("--era", "modern")
    quiet = fake_server_config("quiet", "--tool", "echo")
    write_user_config(
        {
            "modern": {"type": "http", "url": server.url},
            "quiet": {"command": quiet.command, "args": list(quiet.args)},
        }
    )
    completed = subprocess.run(
        [sys.executable, "-m", "mcpfleet.cli.main", "--cwd", str(tmp_path), "--json", "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ.copy(),
    )
    assert completed.returncode == 0, completed.stderr
    rows = {row["name"]: row for row in json.loads(completed.stdout)["servers"]}
    assert (rows["modern"]["era"], rows["modern"]["protocol_version"]) == ("modern", "2026-07-28")
    assert (rows["quiet"]["era"], rows["quiet"]["protocol_version"]) == ("legacy", "2025-11-25")
