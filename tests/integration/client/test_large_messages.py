"""Messages of any size from a real stdio server: read in linear time, never held past the limit.

A message over the server's ``maxMessageBytes`` fails the one request it answered, with an
error naming the server and the limit, and the next call on the same connection works.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from tests.servers.fixtures import fake_server_config, first_text

from mcpfleet.client import connect_to_server
from mcpfleet.config.model import DEFAULT_MAX_MESSAGE_BYTES
from mcpfleet.errors import ToolCallError

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


async def test_a_20_mb_result_arrives_whole(tmp_path: Path) -> None:
    assert DEFAULT_MAX_MESSAGE_BYTES == 64 * MIB
    async with connect_to_server(
        "large", fake_server_config("large", "--hostile-tools"), cwd=tmp_path
    ) as connection:
        result = await connection.call_tool("big", {"bytes": 20_000_000})
        text = first_text(result)
        assert len(text) == 20_000_000 and text.strip("x") == ""


async def test_a_message_over_the_limit_fails_that_call_and_keeps_the_connection(
    tmp_path: Path,
) -> None:
    config = fake_server_config("capped", "--hostile-tools", max_message_bytes=MIB)
    async with connect_to_server("capped", config, cwd=tmp_path) as connection:
        tracemalloc.start()
        try:
            with pytest.raises(ToolCallError) as caught:
                await connection.call_tool("big", {"bytes": 8 * MIB})
            _, peak_bytes = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        message = str(caught.value)
        assert 'MCP server "capped"' in message and "over its limit of 1 MiB" in message
        assert "big" in message and '"maxMessageBytes"' in message
        # The 8 MiB answer went through the reader without ever being held.
        assert peak_bytes < 4 * MIB, f"peak of {peak_bytes} bytes while reading an oversized message"
        result = await connection.call_tool("echo", {"message": "still here"})
        assert first_text(result) == "still here"
        assert not connection.closed
