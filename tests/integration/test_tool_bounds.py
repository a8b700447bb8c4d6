"""What one server's tool list may cost the fleet (issue 22, "Bounds"): a tool no client can use
is left out alone, and a server listing too many tools is cut at its cap without its further
pages being read. Real subprocess servers (``tests/servers/fake_server.py``)."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
from tests.servers.fixtures import FAKE_SERVER, fake_server_config

import mcpfleet.client.connection  # noqa: F401  (pay the SDK's import before any gate is timed)
from mcpfleet import paths
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.config.model import ServerConfig, SourceInfo, fingerprint_of
from mcpfleet.fleet.cache import MCPToolCache
from mcpfleet.fleet.manager import MCPManager

pytestmark = pytest.mark.anyio

DEFAULT_MAX_TOOLS = 2000
"""The documented default cap of one server's tools (``config.model.DEFAULT_MAX_TOOLS``)."""
BIG_FLEET_TIMEOUT_MS = 600_000
"""Handshake and listing bound of a server of 100 000 tools on a loaded machine (an upper bound
that never decides a verdict)."""


def fake(name: str, *flags: str, **fields: object) -> ServerConfig:
    from dataclasses import replace

    config = fake_server_config(name, *flags, **fields)
    return replace(config, fingerprint=fingerprint_of(config))


def sources(*configs: ServerConfig) -> tuple[dict[str, ServerConfig], dict[str, SourceInfo]]:
    return (
        {config.name: config for config in configs},
        {
            config.name: SourceInfo("mcpfleet", "mcpfleet", f"/virtual/{config.name}.json", "user")
            for config in configs
        },
    )


def tool_names(manager: MCPManager, server: str) -> list[str]:
    return [
        tool.label.split("/", 1)[1] for tool in manager.get_tools() if tool.label.startswith(f"{server}/")
    ]


def screening_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "mcpfleet.client.screening" and record.levelno == logging.WARNING
    ]


async def test_tools_that_cannot_be_used_are_left_out_and_the_rest_load(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    odd = fake("odd", "--tool", "echo", "--tool", "add", "--unusable-tools")
    cache = MCPToolCache(tmp_path / "tools.sqlite3")
    with caplog.at_level(logging.WARNING):
        async with MCPManager("/", cache=cache, startup_timeout_ms=0) as manager:
            report = await manager.connect_servers(*sources(odd))
            assert not report.errors
            assert sorted(tool_names(manager, "odd")) == ["add", "echo"]
            # The good tools answer as ever.
            result = await manager.call_tool("odd", "add", {"a": 2, "b": 3})
            assert result.structured_content == {"sum": 5}
    cached = cache.get("odd", odd.fingerprint)
    assert cached is not None
    assert sorted(tool.name for tool in cached.tools) == ["add", "echo"]
    cache.close()
    warnings = screening_warnings(caplog)
    assert len(warnings) == 1, warnings
    (warning,) = warnings
    assert 'MCP server "odd"' in warning
    for named in (
        r"'lone\ud800surrogate' (a lone surrogate in its name)",
        "'surrogate_text' (a lone surrogate in its text)",
        "'string_schema' (inputSchema.type",
        "'schema_not_object' (inputSchema",
        "the tool at index",
    ):
        assert named in warning, (named, warning)


async def test_a_lone_surrogate_in_other_text_reads_as_a_replacement_character(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # hostile_text_server.py appends its --text to every description and to its resource's
    # name. An argument holding the lone surrogate U+DCFF reaches the server as the byte 0xFF,
    # which Python reads back as that surrogate, and its JSON carries it as "\udcff".
    hostile = ServerConfig(
        name="hostile",
        transport="stdio",
        command=sys.executable,
        args=(str(FAKE_SERVER.parent / "hostile_text_server.py"), "--name", "hostile", "--text", "\udcff"),
        timeout_ms=20_000,
    )
    with caplog.at_level(logging.WARNING):
        async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
            report = await manager.connect_servers(*sources(hostile))
            assert not report.errors
            # A name is not text to show: a tool whose description holds it is left out...
            assert tool_names(manager, "hostile") == []
            # ...while the resource's name arrives with U+FFFD in its place, instead of the
            # whole answer being skipped as a non-JSON line (and its request waiting out its
            # timeout).
            resources = await manager.list_resources("hostile")
    assert [resource["name"] for resource in resources] == ["readme \ufffd"]
    (warning,) = screening_warnings(caplog)
    assert "(a lone surrogate in its text)" in warning


@pytest.mark.parametrize("paging", [(), ("--page-size", "1000")], ids=["one-answer", "pages-of-1000"])
async def test_a_server_of_100000_tools_is_cut_at_its_cap_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, paging: tuple[str, ...]
) -> None:
    requests = tmp_path / "requests.log"
    big = fake(
        "big",
        "--tool",
        "echo",
        "--tools",
        "100000",
        "--request-log",
        str(requests),
        *paging,
        timeout_ms=BIG_FLEET_TIMEOUT_MS,
    )
    with caplog.at_level(logging.WARNING):
        async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
            report = await manager.connect_servers(*sources(big))
            assert not report.errors
            names = tool_names(manager, "big")
    assert len(names) == DEFAULT_MAX_TOOLS
    assert len(set(names)) == DEFAULT_MAX_TOOLS
    cut = [record.getMessage() for record in caplog.records if "lists more than" in record.getMessage()]
    assert cut == [
        f'MCP server "big" lists more than {DEFAULT_MAX_TOOLS} tools: only its first {DEFAULT_MAX_TOOLS} are '
        'used; raise "maxTools" in its entry (or "maxToolsPerServer" in mcpfleet\'s user config) to take more'
    ]
    listings = requests.read_text().splitlines().count("tools/list")
    # Paged: the two pages that hold the first 2 000 tools, not the hundred the server has.
    assert listings == (1 if not paging else 2)


async def test_max_tools_of_an_entry_and_of_the_user_config(tmp_path: Path) -> None:
    user_config = paths.user_config_file()
    user_config.parent.mkdir(parents=True, exist_ok=True)
    server = [str(FAKE_SERVER), "--tool", "echo", "--tools", "40"]
    user_config.write_text(
        json.dumps(
            {
                "maxToolsPerServer": 7,
                "mcpServers": {
                    "own_cap": {
                        "command": sys.executable,
                        "args": [*server, "--name", "own_cap"],
                        "maxTools": 3,
                    },
                    "user_cap": {"command": sys.executable, "args": [*server, "--name", "user_cap"]},
                },
            }
        )
    )
    discovery = load_all_mcp_configs(tmp_path, enable_project_config=False)
    assert not discovery.errors
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        await manager.connect_servers(discovery.configs, discovery.sources)
        assert len(tool_names(manager, "own_cap")) == 3
        assert len(tool_names(manager, "user_cap")) == 7


async def test_a_max_tools_that_is_not_a_count_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    user_config = paths.user_config_file()
    user_config.parent.mkdir(parents=True, exist_ok=True)
    user_config.write_text(
        json.dumps(
            {
                "maxToolsPerServer": "many",
                "mcpServers": {"capped": {"command": sys.executable, "args": ["x"], "maxTools": 0}},
            }
        )
    )
    discovery = load_all_mcp_configs(tmp_path, enable_project_config=False)
    messages = [failure.message for failure in discovery.errors]
    assert any(
        "\"maxToolsPerServer\" must be a whole number of tools >= 1, not 'many'" in m for m in messages
    )
    (entry,) = [entry for entry in discovery.entries if entry.name == "capped"]
    assert entry.state == "invalid"
    assert '"maxTools" must be a whole number of tools >= 1, not 0' in entry.reason
