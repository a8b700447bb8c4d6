"""``mcpfleet serve`` over time: the instant list from the cache and the ``list_changed`` that
follows, a crashing backend kept then given up, what the instructions say about servers not
served, and names under ``--prefix`` and ``--max-name-length``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from tests.integration.gateway.gateway_harness import (
    ERAS,
    MODERN,
    fake,
    open_gateway,
    serve_command,
    wait_until,
    write_config,
)
from tests.servers.fixtures import READS_TEST_SERVERS

pytestmark = pytest.mark.anyio


def _listing(tools: list[mcp_types.Tool]) -> list[dict[str, Any]]:
    return [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in tools]


class ListChanges:
    """Counts ``tools/list_changed`` as a handshake-era client receives it."""

    def __init__(self) -> None:
        self.tools = 0

    async def __call__(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self.tools += 1


@pytest.mark.parametrize("mode", ERAS)
async def test_a_warm_cache_answers_at_once_then_list_changed_brings_the_live_list(
    isolated_home: Path, mode: str
) -> None:
    gate = isolated_home / "backend-may-start"
    extra = isolated_home / "backend-has-an-extra-tool"
    flags = (
        "--tool",
        "echo",
        "--rich-tools",
        "--start-when-exists",
        str(gate),
        "--extra-tool-if-exists",
        str(extra),
    )
    # Its tools grow while it runs: pinning would withhold the added one (tests/integration/test_pinning.py).
    servers = {"quick": fake("quick", "--tool", "add"), "slow": {**fake("slow", *flags), "pinning": "off"}}

    gate.touch()
    async with open_gateway(isolated_home, servers, mode=mode, global_args=("--startup-timeout", "0")) as run:
        first = _listing((await run.client.list_tools()).tools)
    assert {tool["name"] for tool in first} == {"quick_add", "slow_echo", "slow_fancy"}

    # Next start: the slow backend cannot start until the test says so, and will then list one
    # more tool than the cache remembers.
    gate.unlink()
    extra.touch()
    changes = ListChanges()
    async with open_gateway(isolated_home, servers, mode=mode, message_handler=changes) as run:
        client = run.client
        # The slow backend cannot start before the gate exists: any answer is one that did not wait.
        cached = _listing((await client.list_tools()).tools)
        assert cached == first, "the cached list must be the very list the live backend gave"
        assert not gate.exists()

        async def live_list_has_the_extra_tool() -> bool:
            names = {tool.name for tool in (await client.list_tools()).tools}
            return "slow_extra" in names

        deferred_results: list[mcp_types.CallToolResult] = []

        async def call_the_deferred_tool() -> None:
            deferred_results.append(await client.call_tool("slow_echo", {"message": "worth the wait"}))

        async with anyio.create_task_group() as calls:
            calls.start_soon(call_the_deferred_tool)
            await anyio.sleep(0.5)
            assert not deferred_results, "a call to a deferred tool waits for its backend"
            if mode == MODERN:
                async with client.listen(tools_list_changed=True) as subscription:
                    gate.touch()
                    with anyio.fail_after(20):
                        async for _event in subscription:
                            if await live_list_has_the_extra_tool():
                                break
            else:
                gate.touch()
                await wait_until(lambda: changes.tools >= 1)
                assert await live_list_has_the_extra_tool(), (
                    [t.name for t in (await client.list_tools()).tools],
                    run.stderr,
                )
        assert deferred_results[0].structured_content == {"message": "worth the wait"}
        called = await client.call_tool("slow_extra", {"message": "from the live backend"})
        assert called.structured_content == {"message": "from the live backend"}


async def test_a_backend_that_starts_late_joins_with_list_changed(isolated_home: Path) -> None:
    gate = isolated_home / "late-may-start"
    servers = {
        "early": fake("early", "--tool", "echo"),
        "late": fake("late", "--tool", "echo", "--start-when-exists", str(gate)),
    }
    changes = ListChanges()
    async with open_gateway(isolated_home, servers, message_handler=changes) as run:
        assert "late (starting" in (run.client.instructions or "")
        # No request yet: a client is told of list changes from its handshake on.
        gate.touch()
        await wait_until(lambda: changes.tools >= 1)
        assert "late_echo" in {tool.name for tool in (await run.client.list_tools()).tools}


async def test_a_crashing_backend_keeps_its_tools_until_the_breaker_gives_it_up(isolated_home: Path) -> None:
    # Each connection of "fragile" dies shortly after its handshake: reconnected, it dies again,
    # until its breaker trips (more than 5 crashes within 30 s).
    servers = {
        "fragile": fake("fragile", "--tool", "echo", "--exit-after", "0.3"),
        "steady": fake("steady", "--tool", "echo"),
    }
    changes = ListChanges()
    async with open_gateway(
        isolated_home, servers, global_args=("--startup-timeout", "0"), message_handler=changes
    ) as run:
        client = run.client
        saw_tools_while_reconnecting = False

        async def given_up() -> bool:
            nonlocal saw_tools_while_reconnecting
            names = {tool.name for tool in (await client.list_tools()).tools}
            if "fragile_echo" in names:
                lost_once = "MCP server fragile failed after start-up" in run.stderr
                saw_tools_while_reconnecting = saw_tools_while_reconnecting or lost_once
                return False
            return True

        await wait_until(given_up, timeout_s=60, interval_s=0.1)
        assert saw_tools_while_reconnecting
        assert changes.tools >= 1
        refused = await client.call_tool("fragile_echo", {"message": "anyone?"})
        assert refused.is_error
        text = refused.content[0].text  # type: ignore[union-attr]
        assert text.startswith("MCP error:") and "fragile" in text and "crashed more than 5 times" in text
        # The gateway and the other backend are unharmed.
        survived = await client.call_tool("steady_echo", {"message": "still here"})
        assert survived.structured_content == {"message": "still here"}


async def test_instructions_name_a_project_server_awaiting_approval(isolated_home: Path) -> None:
    project = isolated_home / "project"
    project.mkdir()
    # Sandboxed as every project server; its sandbox reads the test servers' folder.
    local = {**fake("local", "--tool", "echo"), "sandbox": READS_TEST_SERVERS}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"local": local}}))
    async with open_gateway(isolated_home, {"user": fake("user", "--tool", "echo")}, cwd=project) as run:
        instructions = run.client.instructions or ""
        names = {tool.name for tool in (await run.client.list_tools()).tools}
    assert "local: a project server awaiting approval; run `mcpfleet approve local`" in instructions
    assert "local_echo" not in names

    async with open_gateway(
        isolated_home,
        {"user": fake("user", "--tool", "echo")},
        cwd=project,
        global_args=("--trust-project", "--startup-timeout", "0"),
    ) as run:
        names = {tool.name for tool in (await run.client.list_tools()).tools}
    assert "local_echo" in names


async def test_a_secret_from_the_config_never_appears_in_served_text(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "tok-9f8e7d6c5b4a"
    monkeypatch.setenv("GATEWAY_TEST_TOKEN", secret)
    # The server fails at start, quoting its own (substituted) arguments on stderr.
    leaky = fake("leaky", "--pid-file", "/nonexistent-folder/${GATEWAY_TEST_TOKEN}/pid")
    async with open_gateway(isolated_home, {"leaky": leaky}, global_args=("--startup-timeout", "0")) as run:
        instructions = run.client.instructions or ""
    assert "leaky: failed" in instructions and "mcpfleet status" in instructions
    assert "***" in instructions
    assert secret not in instructions


async def test_prefix_none_passes_names_and_uris_through(isolated_home: Path) -> None:
    servers = {"alpha": fake("alpha", "--tool", "echo"), "beta": fake("beta", "--tool", "add")}
    async with open_gateway(
        isolated_home, servers, serve_args=("--prefix", "none"), global_args=("--startup-timeout", "0")
    ) as run:
        names = sorted(tool.name for tool in (await run.client.list_tools()).tools)
        assert names == ["add", "echo"]
        assert (await run.client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"sum": 2}


def test_prefix_none_refuses_to_start_when_two_servers_share_a_name(isolated_home: Path) -> None:
    config = write_config(
        isolated_home, {"alpha": fake("alpha", "--tool", "echo"), "beta": fake("beta", "--tool", "echo")}
    )
    completed = subprocess.run(
        serve_command(config, "--prefix", "none", global_args=("--startup-timeout", "0")),
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        cwd=isolated_home,
        timeout=60,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    error_lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(error_lines) == 1, completed.stderr
    assert '"alpha"' in error_lines[0] and '"beta"' in error_lines[0] and '"echo"' in error_lines[0]
    assert "--prefix none" in error_lines[0]


async def test_max_name_length_bounds_every_served_name(isolated_home: Path) -> None:
    long_server = "a-server-with-a-really-quite-long-name"
    servers = {long_server: fake(long_server, "--tool", "echo", "--tool", "add", "--tools", "2")}
    async with open_gateway(
        isolated_home, servers, serve_args=("--max-name-length", "30"), global_args=("--startup-timeout", "0")
    ) as run:
        names = [tool.name for tool in (await run.client.list_tools()).tools]
        assert len(names) == 4 and len(set(names)) == 4
        assert all(len(name) <= 30 for name in names), names
        for name in names:  # every shortened name still leads to its tool
            result = await run.client.call_tool(name, {"message": "short", "a": 1, "b": 2})
            assert not result.is_error, name


def test_max_name_length_below_the_hash_is_a_usage_error(isolated_home: Path) -> None:
    config = write_config(isolated_home, {})
    completed = subprocess.run(
        serve_command(config, "--max-name-length", "5"), capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 2
    assert "--max-name-length" in completed.stderr
