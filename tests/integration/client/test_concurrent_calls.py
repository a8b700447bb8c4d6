"""Many callers on one connection at once (a real stdio server, tests/servers/fake_server.py): each
gets its own answer whatever order the server answers in, one caller's cancellation or deadline
touches no other call, and the connection's one deadline timer (``deadline.DeadlineKeeper``)
still ends the call whose deadline comes first."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from tests.servers.fixtures import completed, fake_server_config, first_text

from mcpfleet.client import connect_to_server
from mcpfleet.client.connection import ServerConnection
from mcpfleet.errors import ToolCallError

pytestmark = pytest.mark.anyio

CALLERS = 8
TOOLS = ("--tool", "echo", "--tool", "sleep", "--tool", "hang")


async def echo(connection: ServerConnection, message: str) -> str:
    result = completed(await connection.call_tool("echo", {"message": message}))
    assert result.structured_content is not None
    return str(result.structured_content["message"])


async def test_concurrent_callers_each_get_their_own_answer_in_any_order(tmp_path: Path) -> None:
    async with connect_to_server("busy", fake_server_config("busy", *TOOLS), cwd=tmp_path) as connection:
        answers: dict[str, str] = {}
        first_sent = anyio.Event()
        first_answered = False
        waiting = anyio.CancelScope()

        async def first() -> None:
            nonlocal first_answered
            with waiting:
                first_sent.set()
                await connection.call_tool("sleep", {"seconds": 60, "progress_interval": 0})
                first_answered = True

        async def caller(index: int) -> None:
            await first_sent.wait()
            for call in range(20):
                key = f"{index}-{call}"
                answers[key] = await echo(connection, key)

        async with anyio.create_task_group() as group:
            group.start_soon(first)
            async with anyio.create_task_group() as callers:
                for index in range(CALLERS):
                    callers.start_soon(caller, index)
            # Every later request was answered while the first one is still out: answers are
            # matched to their callers by id, not by the order the requests left in.
            assert not first_answered
            waiting.cancel()

        assert answers == {key: key for key in answers} and len(answers) == CALLERS * 20
        assert await echo(connection, "after") == "after"


async def test_cancelling_one_caller_leaves_the_others_answered(tmp_path: Path) -> None:
    async with connect_to_server("cancel", fake_server_config("cancel", *TOOLS), cwd=tmp_path) as connection:
        answers: dict[int, str] = {}
        hanging = anyio.CancelScope()
        hang_cancelled = False

        async def hang() -> None:
            nonlocal hang_cancelled
            with hanging:
                await connection.call_tool("hang", {})
            hang_cancelled = hanging.cancelled_caught

        async def caller(index: int) -> None:
            for call in range(10):
                answers[index * 100 + call] = await echo(connection, str(index * 100 + call))
                if index == 0 and call == 4:
                    hanging.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(hang)
            for index in range(CALLERS):
                group.start_soon(caller, index)

        assert hang_cancelled
        assert answers == {key: str(key) for key in answers} and len(answers) == CALLERS * 10
        assert await echo(connection, "after") == "after"


async def test_a_shorter_deadline_ends_its_call_while_longer_ones_run_on(tmp_path: Path) -> None:
    async with connect_to_server(
        "deadlines", fake_server_config("deadlines", *TOOLS), cwd=tmp_path
    ) as connection:
        # A first call makes the connection's timer wait for a one-minute deadline; the later
        # call's deadline comes much sooner and must still end it.
        long_started = anyio.Event()
        outcome: dict[str, object] = {}

        async def long_call() -> None:
            long_started.set()
            result = await connection.call_tool(
                "sleep", {"seconds": 1.0, "progress_interval": 0}, timeout_ms=60_000
            )
            outcome["long"] = first_text(result)

        async def short_call() -> None:
            await long_started.wait()
            with pytest.raises(
                ToolCallError, match=r'MCP tool hang on server "deadlines" timed out'
            ) as raised:
                await connection.call_tool("hang", {}, timeout_ms=200)
            outcome["short"] = str(raised.value)
            outcome["long_running_then"] = "long" not in outcome

        async with anyio.create_task_group() as group:
            group.start_soon(long_call)
            group.start_soon(short_call)

        assert outcome["long"] == "slept 1.0"
        assert outcome["long_running_then"] is True
        assert "timeout 200ms" in str(outcome["short"])
        assert await echo(connection, "still up") == "still up"
