"""What a server asks of the client reaches one ``ServerRequestHandler``, told which server asks,
in both protocol eras (tests/servers/asking_server.py): the seam the gateway's relay uses."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from tests.servers.fixtures import SERVERS_DIR, first_text

from mcpfleet import MCPManager
from mcpfleet.client import connect_to_server
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import MCPFleetError

pytestmark = pytest.mark.anyio

ASKING_SERVER = SERVERS_DIR / "asking_server.py"
ERAS = ["legacy", "modern"]


def asking_config(name: str, era: str) -> ServerConfig:
    flags = ("--legacy",) if era == "legacy" else ()
    return ServerConfig(
        name=name,
        transport="stdio",
        command=sys.executable,
        args=(str(ASKING_SERVER), "--name", name, *flags),
    )


class Recorder:
    """Answers every question with the name of the server that asked, and records it."""

    def __init__(self, roots: list[dict[str, Any]] | None = None, refuse: MCPError | None = None) -> None:
        self.asked: list[tuple[str, str]] = []
        self.roots = roots
        self.refuse = refuse

    @property
    def sampling_capability(self) -> dict[str, Any] | None:
        return {}

    @property
    def offers_elicitation(self) -> bool:
        return True

    async def create_message(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append((server, "sampling"))
        if self.refuse is not None:
            raise self.refuse
        prompt = params["messages"][0]["content"]["text"]
        return {"role": "assistant", "content": {"type": "text", "text": f"{prompt}!"}, "model": server}

    async def elicit(self, server: str, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append((server, "elicitation"))
        return {"action": "accept", "content": {"answer": f"{server} says yes"}}

    async def list_roots(self, server: str) -> list[dict[str, Any]] | None:
        self.asked.append((server, "roots"))
        return self.roots


@pytest.mark.parametrize("era", ERAS)
async def test_the_handler_answers_sampling_elicitation_and_roots_told_which_server_asks(
    tmp_path: Path, era: str
) -> None:
    handler = Recorder(roots=[{"uri": "file:///work/project", "name": "project"}])
    async with connect_to_server(
        "asker", asking_config("asker", era), cwd=tmp_path, server_requests=handler
    ) as connection:
        assert connection.era == era
        sampled = first_text(await connection.call_tool("sample", {"prompt": "hello"}))
        elicited = first_text(await connection.call_tool("elicit", {"message": "agree?"}))
        roots = first_text(await connection.call_tool("roots", {}))
    assert sampled == "sampled hello! from asker"
    assert elicited == 'elicited accept {"answer": "asker says yes"}'
    assert roots == 'roots ["file:///work/project"]'
    assert handler.asked == [("asker", "sampling"), ("asker", "elicitation"), ("asker", "roots")]


@pytest.mark.parametrize("era", ERAS)
async def test_roots_fall_back_to_the_working_folder_when_the_handler_has_none(
    tmp_path: Path, era: str
) -> None:
    async with connect_to_server(
        "asker", asking_config("asker", era), cwd=tmp_path, server_requests=Recorder(roots=None)
    ) as connection:
        roots = first_text(await connection.call_tool("roots", {}))
    assert roots == f'roots ["{tmp_path.resolve().as_uri()}"]'  # noqa: ASYNC240 (no I/O)


async def test_an_error_the_handler_raises_reaches_a_handshake_era_server_unchanged(tmp_path: Path) -> None:
    refusal = MCPError(code=-32600, message="the client did not declare sampling")
    async with connect_to_server(
        "asker", asking_config("asker", "legacy"), cwd=tmp_path, server_requests=Recorder(refuse=refusal)
    ) as connection:
        text = first_text(await connection.call_tool("sample", {"prompt": "hello"}))
    assert text == "refused -32600 the client did not declare sampling"


async def test_an_error_the_handler_raises_ends_a_modern_servers_call_with_that_message(
    tmp_path: Path,
) -> None:
    """A 2026-07-28 server cannot be answered with an error: the round is abandoned, and the
    call fails with the handler's message."""
    refusal = MCPError(code=-32600, message="the client did not declare sampling")
    async with connect_to_server(
        "asker", asking_config("asker", "modern"), cwd=tmp_path, server_requests=Recorder(refuse=refusal)
    ) as connection:
        with pytest.raises(MCPFleetError, match="the client did not declare sampling"):
            await connection.call_tool("sample", {"prompt": "hello"})


async def test_roots_changed_reaches_handshake_era_servers_and_nothing_is_sent_to_modern_ones(
    tmp_path: Path,
) -> None:
    """The handshake-era server asks again after each change (outside any call) and gets the
    handler's roots; 2026-07-28 has no such notification."""
    handler = Recorder(roots=[{"uri": "file:///changed"}])
    async with MCPManager(tmp_path, cache=None, server_requests=handler) as manager:
        await manager.connect_servers(
            {"old": asking_config("old", "legacy"), "new": asking_config("new", "modern")}, {}
        )
        await manager.notify_roots_changed()
        await manager.notify_roots_changed()
        old = await wait_for_text(
            manager, "old", "roots_changes", 'roots changed 2 times, last ["file:///changed"]'
        )
        new = first_text(await manager.call_tool("new", "roots_changes", {}))
    assert old == 'roots changed 2 times, last ["file:///changed"]'
    assert new == "roots changed 0 times, last null"


async def wait_for_text(
    manager: MCPManager, server: str, tool: str, expected: str, within_s: float = 10
) -> str:
    """The tool's text once it is ``expected``, or the last one after ``within_s``."""
    text = ""
    with anyio.move_on_after(within_s):
        while True:
            text = first_text(await manager.call_tool(server, tool, {}))
            if text == expected:
                break
            await anyio.sleep(0.05)
    return text


async def test_server_requests_and_the_hosts_hooks_together_are_refused(tmp_path: Path) -> None:
    async def hook(request: dict[str, Any]) -> dict[str, Any]:
        return {}

    with pytest.raises(ValueError, match="either server_requests or elicitation_handler/sampling_handler"):
        MCPManager(tmp_path, server_requests=Recorder(), sampling_handler=hook)
