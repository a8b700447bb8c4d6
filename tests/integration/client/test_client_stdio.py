"""One connection to a real stdio server process (tests/servers/fake_server.py)."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.servers.fixtures import completed, fake_server_config, first_text

from mcpfleet.client import ConnectionOptions, connect_to_server, open_connection
from mcpfleet.errors import (
    CommandNotFoundError,
    ConnectionClosedError,
    ConnectTimeoutError,
    ServerExitedError,
    ToolCallError,
)
from mcpfleet.transport.process import ServerProcess

pytestmark = pytest.mark.anyio


def read_pids(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()]


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


async def wait_group_gone(pgid: int, seconds: float = 3.0) -> bool:
    """Orphaned grandchildren are reaped by init asynchronously; give it a moment."""
    for _ in range(round(seconds / 0.02)):
        if group_gone(pgid):
            return True
        await anyio.sleep(0.02)
    return group_gone(pgid)


async def test_handshake_exposes_server_identity(tmp_path: Path) -> None:
    async with connect_to_server("files", fake_server_config("files"), cwd=tmp_path) as connection:
        assert connection.server_info.name == "files"
        assert connection.server_info.version == "1.2.3"
        assert connection.instructions == "fake server files"
        assert connection.protocol_version == "2025-11-25"
        assert connection.capabilities["tools"] == {"listChanged": True}
        assert isinstance(connection.pid, int)
        assert {"spawn", "handshake"} <= set(connection.timings_ms)
        assert not connection.closed
        await connection.ping()
        resources = await connection.list_resources()
        assert resources[0]["uri"] == "fake://readme"
        read = await connection.read_resource("fake://readme")
        assert read["contents"][0]["text"] == "readme of files"
        prompts = await connection.list_prompts()
        assert prompts[0]["name"] == "greet"
        prompt = await connection.get_prompt("greet", {"who": "Ada"})
        assert prompt["messages"][0]["content"]["text"] == "Hello Ada"
    assert connection.closed
    assert connection.close_reason == "closed by the client"


async def test_handshake_timeout_has_the_exact_message_and_kills_the_server(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    config = fake_server_config("slow", "--delay-start", "30", "--pid-file", str(pid_file))
    started = time.monotonic()
    with pytest.raises(ConnectTimeoutError) as caught:
        async with connect_to_server("slow", config, cwd=tmp_path, timeout_ms=400):
            pass
    assert str(caught.value) == 'Connection to MCP server "slow" timed out after 400ms'
    assert time.monotonic() - started < 5
    assert await wait_group_gone(read_pids(pid_file)[0])


async def test_a_connection_opens_from_one_options_record_its_keywords_replacing_fields(
    tmp_path: Path,
) -> None:
    """The record is what the fleet passes; a keyword given with it wins over its field."""
    options = ConnectionOptions(cwd=tmp_path, timeout_ms=30_000)
    async with connect_to_server("files", fake_server_config("files"), options) as connection:
        assert connection.server_info.name == "files"
    config = fake_server_config("slow", "--delay-start", "30")
    with pytest.raises(ConnectTimeoutError, match="timed out after 300ms"):
        async with connect_to_server("slow", config, options, timeout_ms=300):
            pass


async def test_config_timeout_bounds_the_handshake(tmp_path: Path) -> None:
    config = fake_server_config("slow", "--delay-start", "30", timeout_ms=300)
    with pytest.raises(ConnectTimeoutError, match="timed out after 300ms"):
        async with connect_to_server("slow", config, cwd=tmp_path):
            pass


async def test_exit_before_handshake_names_command_code_and_stderr(tmp_path: Path) -> None:
    config = fake_server_config(
        "broken", "--exit-before-handshake", "--exit-code", "3", "--stderr-lines", "8"
    )
    with pytest.raises(ServerExitedError) as caught:
        async with connect_to_server("broken", config, cwd=tmp_path):
            pass
    message = str(caught.value)
    assert message.startswith(f'MCP server "broken" ({sys.executable} ')
    assert "exited with code 3 before the handshake: " in message
    assert "stderr line 7" in message and "stderr line 0" not in message
    assert caught.value.returncode == 3


class LateExitNotice:
    """A server's process as a loaded event loop sees it: its exit reported ``late_s`` after the
    kernel has it (the loop's child watcher not scheduled yet). Everything else is the real
    process's."""

    def __init__(self, process: Any, late_s: float) -> None:
        self._process = process
        self._late_s = late_s
        self._noticed_at: float | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._process, name)

    @property
    def returncode(self) -> int | None:
        code: int | None = self._process.returncode
        if code is None:
            return None
        if self._noticed_at is None:
            self._noticed_at = time.monotonic() + self._late_s
        return code if time.monotonic() >= self._noticed_at else None

    async def wait(self) -> int:
        code: int = await self._process.wait()
        if self.returncode is None:  # the notice is late from now on
            await anyio.sleep(self._late_s)
        return code


async def test_an_exit_the_event_loop_reports_late_is_still_the_servers_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under load the loop learnt of the exit after the stop's first look: the server was then
    # signalled as if it still ran, and its error said "closed the connection" instead of its
    # exit code (a status row that differed between the daemon and this process).
    opened = ServerProcess._open_process

    async def opened_with_late_notice(self: ServerProcess, *args: Any, **kwargs: Any) -> Any:
        return LateExitNotice(await opened(self, *args, **kwargs), late_s=0.3)

    monkeypatch.setattr(ServerProcess, "_open_process", opened_with_late_notice)
    config = fake_server_config("broken", "--exit-before-handshake", "--exit-code", "3")
    with pytest.raises(ServerExitedError) as caught:
        async with connect_to_server("broken", config, cwd=tmp_path):
            pass
    assert "exited with code 3 before the handshake: (no stderr output)" in str(caught.value)
    assert caught.value.returncode == 3


async def test_command_not_found_names_server_and_command(tmp_path: Path) -> None:
    config = fake_server_config("ghost")
    config = type(config)(name="ghost", transport="stdio", command="mcpfleet-no-such-command-xyz")
    with pytest.raises(CommandNotFoundError) as caught:
        async with connect_to_server("ghost", config, cwd=tmp_path):
            pass
    assert '"ghost"' in str(caught.value)
    assert "command not found: mcpfleet-no-such-command-xyz" in str(caught.value)


async def test_permission_denied_names_server_and_command(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    config = fake_server_config("locked")
    config = type(config)(name="locked", transport="stdio", command=str(script))
    with pytest.raises(CommandNotFoundError) as caught:
        async with connect_to_server("locked", config, cwd=tmp_path):
            pass
    assert f'"locked": permission denied running {script}' in str(caught.value)


async def test_non_json_stdout_lines_are_skipped(tmp_path: Path) -> None:
    async with connect_to_server(
        "noisy", fake_server_config("noisy", "--banner"), cwd=tmp_path
    ) as connection:
        result = await connection.call_tool("echo", {"message": "through the noise"})
        assert first_text(result) == "through the noise"
        assert len(await connection.list_tools()) == 7


async def test_child_gets_parent_env_plus_config_env_and_project_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCPFLEET_TEST_PARENT_VAR", "from-parent")
    config = fake_server_config("env", env={"MCPFLEET_TEST_CHILD_VAR": "from-config"})
    async with connect_to_server("env", config, cwd=tmp_path) as connection:
        parent = completed(await connection.call_tool("env", {"name": "MCPFLEET_TEST_PARENT_VAR"}))
        child = completed(await connection.call_tool("env", {"name": "MCPFLEET_TEST_CHILD_VAR"}))
        assert parent.structured_content == {"value": "from-parent", "cwd": str(tmp_path)}
        assert child.structured_content is not None
        assert child.structured_content["value"] == "from-config"


async def test_list_tools_follows_pagination(tmp_path: Path) -> None:
    config = fake_server_config("paged", "--tools", "9", "--page-size", "4")
    async with connect_to_server("paged", config, cwd=tmp_path) as connection:
        tools = await connection.list_tools()
        names = [tool.name for tool in tools]
        assert len(names) == 16 and len(set(names)) == 16
        echo = next(tool for tool in tools if tool.name == "echo")
        assert echo.input_schema["required"] == ["message"]
        assert echo.description == "Echo a message back"


async def test_call_results_text_structured_and_error(tmp_path: Path) -> None:
    async with connect_to_server("calc", fake_server_config("calc"), cwd=tmp_path) as connection:
        added = completed(await connection.call_tool("add", {"a": 2, "b": 3}))
        assert first_text(added) == "5"
        assert added.structured_content == {"sum": 5}
        assert not added.is_error
        failed = completed(await connection.call_tool("fail", {"message": "nope"}))
        assert failed.is_error
        assert first_text(failed) == "nope"
        with pytest.raises(
            ToolCallError, match='MCP server "calc" rejected the call to missing: Unknown tool'
        ):
            await connection.call_tool("missing", {})
        assert completed(
            await connection.call_tool("echo", {"message": "still fine"})
        ).structured_content == {"message": "still fine"}


async def test_progress_extends_the_call_deadline(tmp_path: Path) -> None:
    async with connect_to_server("slowtool", fake_server_config("slowtool"), cwd=tmp_path) as connection:
        progress: list[tuple[float, str | None]] = []

        def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message))

        result = await connection.call_tool(
            "sleep", {"seconds": 1.2, "progress_interval": 0.1}, timeout_ms=400, on_progress=on_progress
        )
        assert first_text(result) == "slept 1.2"
        assert len(progress) >= 5 and progress[0] == (1.0, "step 1")
        with pytest.raises(
            ToolCallError, match=r"MCP tool sleep on server \"slowtool\" timed out after \d+ms"
        ):
            await connection.call_tool("sleep", {"seconds": 5, "progress_interval": 0}, timeout_ms=300)
        # The ceiling: progress cannot keep a call alive past 10x its timeout.
        started = time.monotonic()
        with pytest.raises(ToolCallError, match="timed out"):
            await connection.call_tool("sleep", {"seconds": 30, "progress_interval": 0.05}, timeout_ms=150)
        assert 1.3 < time.monotonic() - started < 4
        assert completed(await connection.call_tool("echo", {"message": "alive"})).structured_content == {
            "message": "alive"
        }


async def test_caller_cancellation_tells_the_server_and_keeps_the_connection(tmp_path: Path) -> None:
    async with connect_to_server("cancel", fake_server_config("cancel"), cwd=tmp_path) as connection:
        with anyio.move_on_after(0.3) as scope:
            await connection.call_tool("sleep", {"seconds": 10})
        assert scope.cancelled_caught
        for _ in range(150):
            if any(line.startswith("cancelled request") for line in connection.stderr_tail()):
                break
            await anyio.sleep(0.02)
        assert any(line.startswith("cancelled request") for line in connection.stderr_tail())
        result = completed(await connection.call_tool("echo", {"message": "after cancel"}))
        assert result.structured_content == {"message": "after cancel"}
        assert not connection.closed


async def test_calls_from_many_tasks_run_concurrently(tmp_path: Path) -> None:
    async with connect_to_server("busy", fake_server_config("busy"), cwd=tmp_path) as connection:
        results: dict[int, Any] = {}

        async def call(index: int) -> None:
            if index % 2:
                results[index] = first_text(await connection.call_tool("sleep", {"seconds": 0.5}))
            else:
                results[index] = completed(
                    await connection.call_tool("echo", {"message": str(index)})
                ).structured_content

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for index in range(10):
                group.start_soon(call, index)
        assert time.monotonic() - started < 2.0  # five 0.5 s sleeps overlapped
        assert results[4] == {"message": "4"} and results[5] == "slept 0.5"


async def test_close_from_another_task_than_connect(tmp_path: Path) -> None:
    holder: list[Any] = []
    async with anyio.create_task_group() as host:

        async def connect() -> None:
            holder.append(await open_connection(host, "handoff", fake_server_config("handoff"), cwd=tmp_path))

        async with anyio.create_task_group() as group:
            group.start_soon(connect)
        connection = holder[0]
        assert (await connection.call_tool("echo", {"message": "x"})).structured_content == {"message": "x"}
        async with anyio.create_task_group() as group:
            group.start_soon(connection.close)
            group.start_soon(connection.close)
        await connection.close()  # idempotent
    assert connection.closed
    with pytest.raises(
        ConnectionClosedError, match='MCP server "handoff" is not connected: closed by the client'
    ):
        await connection.call_tool("echo", {"message": "x"})


async def test_close_ends_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    config = fake_server_config("family", "--spawn-grandchild", "--pid-file", str(pid_file))
    async with connect_to_server("family", config, cwd=tmp_path) as connection:
        leader, grandchild = read_pids(pid_file)
        assert connection.pid == leader
        assert os.getpgid(grandchild) == leader
        await connection.close()
    assert await wait_group_gone(leader)


async def test_close_is_bounded_for_a_server_ignoring_eof_and_sigterm(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    config = fake_server_config(
        "stubborn",
        "--ignore-sigterm",
        "--ignore-stdin-eof",
        "--spawn-grandchild",
        "--pid-file",
        str(pid_file),
    )
    async with connect_to_server("stubborn", config, cwd=tmp_path) as connection:
        leader = read_pids(pid_file)[0]
        started = time.monotonic()
        await connection.close()
        assert time.monotonic() - started < 4.5
    assert await wait_group_gone(leader)


async def test_roots_list_is_answered_with_the_project_root(tmp_path: Path) -> None:
    async with connect_to_server("roots", fake_server_config("roots"), cwd=tmp_path) as connection:
        project_uri = tmp_path.resolve().as_uri()  # noqa: ASYNC240 (no I/O: resolves an existing temp dir)
        text = first_text(await connection.call_tool("roots", {}))
        assert project_uri in text
        assert tmp_path.name in text


async def test_list_changed_reaches_on_notification(tmp_path: Path) -> None:
    received: list[tuple[str, dict[str, Any] | None]] = []
    changed = anyio.Event()

    async def on_notification(method: str, params: dict[str, Any] | None) -> None:
        received.append((method, params))
        if method == "notifications/tools/list_changed":
            changed.set()

    config = fake_server_config("dynamic", "--list-changed-after", "0.2")
    async with connect_to_server(
        "dynamic", config, cwd=tmp_path, on_notification=on_notification
    ) as connection:
        with anyio.fail_after(5):
            await changed.wait()
        assert "late_tool" in [tool.name for tool in await connection.list_tools()]
        # Progress of a call goes to the call's callback, not to on_notification.
        await connection.call_tool(
            "sleep", {"seconds": 0.3, "progress_interval": 0.05}, on_progress=lambda *a: None
        )
        assert [method for method, _ in received] == ["notifications/tools/list_changed"]


async def test_a_burst_of_list_changed_is_folded_and_its_last_one_arrives_while_the_server_is_quiet(
    tmp_path: Path,
) -> None:
    # 15 rounds of the three list_changed in one write (atomic: under the pipe's 4 KiB), then
    # silence: only the reader's own timer can deliver the last of each.
    received: list[str] = []
    six = anyio.Event()

    async def on_notification(method: str, params: dict[str, Any] | None) -> None:
        received.append(method)
        if len(received) == 6:
            six.set()

    config = fake_server_config("bursty", "--list-changed-burst", "15")
    async with connect_to_server("bursty", config, cwd=tmp_path, on_notification=on_notification):
        with anyio.fail_after(10):
            await six.wait()
        await anyio.sleep(0.5)  # nothing else is coming
        kinds = ("tools", "resources", "prompts")
        # Each method's first at once, then each one's last: never one folded into another.
        assert received == [f"notifications/{kind}/list_changed" for kind in kinds] * 2


async def test_process_exit_closes_the_connection_with_a_reason(tmp_path: Path) -> None:
    async with connect_to_server(
        "fragile", fake_server_config("fragile", "--stderr-lines", "2"), cwd=tmp_path
    ) as connection:
        with pytest.raises(ConnectionClosedError):
            await connection.call_tool("crash", {"code": 5})
        with anyio.fail_after(5):
            await connection.wait_closed()
        assert connection.closed
        assert connection.close_reason == "process exited with code 5"
        assert connection.stderr_tail(1) == ["stderr line 1"]
        with pytest.raises(ConnectionClosedError, match="process exited with code 5"):
            await connection.list_tools()
        await connection.close()
    assert connection.close_reason == "process exited with code 5"


async def test_crash_during_a_call_fails_that_call(tmp_path: Path) -> None:
    config = fake_server_config("crashy", "--crash-after-calls", "2", "--exit-code", "4")
    async with connect_to_server("crashy", config, cwd=tmp_path) as connection:
        await connection.call_tool("echo", {"message": "one"})
        with pytest.raises(ConnectionClosedError):
            await connection.call_tool("echo", {"message": "two"})
        await connection.wait_closed()
        assert connection.close_reason == "process exited with code 4"
        assert "crashing as asked" in connection.stderr_tail()


async def test_legacy_handshake_is_fast_on_a_server_that_drops_unknown_requests(tmp_path: Path) -> None:
    started = time.monotonic()
    async with connect_to_server(
        "legacy", fake_server_config("legacy", "--drop-unknown"), cwd=tmp_path
    ) as connection:
        assert time.monotonic() - started < 3  # the SDK's "auto" probe would wait 10 s here
        assert connection.timings_ms["handshake"] < 2000
        assert connection.protocol_version == "2025-11-25"


async def test_open_connection_in_a_caller_task_group(tmp_path: Path) -> None:
    async with anyio.create_task_group() as group:
        connection = await open_connection(group, "grouped", fake_server_config("grouped"), cwd=tmp_path)
        with pytest.raises(ServerExitedError):
            await open_connection(
                group,
                "dead",
                fake_server_config("dead", "--exit-before-handshake", "--exit-code", "2"),
                cwd=tmp_path,
            )
        assert completed(await connection.call_tool("add", {"a": 1, "b": 1})).structured_content == {"sum": 2}
        await connection.close()
    assert connection.closed


async def test_runtime_loss_in_a_task_group_does_not_break_the_group(tmp_path: Path) -> None:
    async with anyio.create_task_group() as group:
        connection = await open_connection(group, "lost", fake_server_config("lost"), cwd=tmp_path)
        with pytest.raises(ConnectionClosedError):
            await connection.call_tool("crash", {"code": 9})
        await connection.wait_closed()
    assert connection.close_reason == "process exited with code 9"


async def test_leaving_the_block_by_an_error_closes_the_server_and_keeps_the_error(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="the caller's own error") as raised:
        async with connect_to_server("leaving", fake_server_config("leaving"), cwd=tmp_path) as connection:
            leader = connection.pid
            raise KeyError("the caller's own error")
    assert type(raised.value) is KeyError  # itself, not inside an exception group
    assert connection.closed and connection.close_reason == "closed by the client"
    assert leader is not None and await wait_group_gone(leader)


async def test_a_mapped_error_keeps_what_the_sdk_raised_as_its_cause(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError

    async with connect_to_server("chained", fake_server_config("chained"), cwd=tmp_path) as connection:
        with pytest.raises(ToolCallError, match='"chained" rejected the call to missing') as raised:
            await connection.call_tool("missing", {})
    assert isinstance(raised.value.__cause__, MCPError)
    assert "Unknown tool" in str(raised.value.__cause__)
