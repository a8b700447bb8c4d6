"""``open_agent_session(daemon=True)`` against a scripted daemon on a real socket (the session
is what is under test): tools registered from the ``tools`` document and called through
``call``, a ``tools_changed`` event swapping them, a daemon gone mid-call, refusals falling
back to a fleet of this process, and the keywords that cannot go with ``daemon=True``; and the
session's ``DaemonFleet`` alone: a daemon started when none runs or one is leaving, and a daemon
that keeps going away given up."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.servers.control_peer import ControlPeer, Reply, control_peer, result
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet import open_agent_session
from mcpfleet.agent.remote import DaemonFleet, DaemonTool
from mcpfleet.contract.wire import FleetSpec
from mcpfleet.daemon_client import paths
from mcpfleet.daemon_client.control import DaemonRefused
from mcpfleet.daemon_client.launch import RECONNECT_LIMIT
from mcpfleet.paths import user_config_file

pytestmark = pytest.mark.anyio

REPO_ROOT = Path(__file__).resolve().parents[3]


async def wait_until(condition: Callable[[], bool], within_s: float = 20.0) -> None:
    with anyio.fail_after(within_s):
        while True:
            if condition():
                return
            await anyio.sleep(0.02)


def tool_row(server: str, tool: str, description: str = "") -> dict[str, Any]:
    return {
        "name": f"mcp_{server}_{tool}",
        "server": server,
        "mcp_name": tool,
        "description": description or f"{tool} of {server}",
        "deferred": False,
        "input_schema": {"type": "object", "properties": {"message": {"type": "string"}}},
    }


class ScriptedFleet:
    """The daemon's side: a tools document that can change, and calls that echo."""

    def __init__(self) -> None:
        self.tools = [tool_row("files", "echo")]
        self.errors: list[dict[str, str]] = [{"path": "mcp:broken", "error": "exited with code 3"}]
        self.drop_next_listing = False

    def __call__(self, request: dict[str, Any]) -> Reply | None:
        if request["op"] == "watch":
            return result(request, {})
        if request["op"] == "tools":
            if self.drop_next_listing:
                self.drop_next_listing = False
                return Reply(close=True)
            return result(request, {"tools": self.tools, "errors": self.errors})
        if request["op"] == "call":
            if request["arguments"].get("message") == "vanish":
                return Reply(close=True)
            text = f"{request['tool']}: {request['arguments'].get('message')}"
            block = {"type": "text", "text": text}
            return result(
                request, {"is_error": False, "text": text, "content": [block], "structured": {"n": 1}}
            )
        return result(request, {})


@pytest.fixture
def scripted() -> ScriptedFleet:
    return ScriptedFleet()


@pytest.fixture
def peer(scripted: ScriptedFleet) -> Any:
    with control_peer(paths.socket_path(), scripted) as running:
        yield running


@pytest.fixture
def local_fleet() -> None:
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"command": sys.executable, "args": [str(FAKE_SERVER), "--name", "local", "--tool", "echo"]}
    path.write_text(json.dumps({"mcpServers": {"local": entry}}))


async def test_tools_come_from_the_daemon_and_calls_go_to_it(tmp_path: Path, peer: ControlPeer) -> None:
    project = str(await anyio.Path(tmp_path).resolve())
    with anyio.fail_after(30):
        async with open_agent_session(tmp_path, daemon=True, trust_project=True) as session:
            (tool,) = session.tools
            assert isinstance(tool, DaemonTool)
            assert (tool.name, tool.description) == ("mcp_files_echo", "echo of files")
            assert tool.parameters["properties"] == {"message": {"type": "string"}}
            assert [(failure.server, failure.message) for failure in session.mcp_errors] == [
                ("broken", "exited with code 3")
            ]
            called = await session.call_tool("files/echo", {"message": "hi"})
            assert (called.text, called.structured, called.is_error) == ("files/echo: hi", {"n": 1}, False)
            assert called.content == [{"type": "text", "text": "files/echo: hi"}]
            assert called.details == {"server": "files", "tool": "echo", "provider": None}
            assert [t.name for t in session.create_subagent().tools] == ["mcp_files_echo"]
            with pytest.raises(RuntimeError, match="run in the mcpfleet daemon"):
                session.mcp_manager  # noqa: B018
    watch, tools, call = peer.requests
    assert watch["op"] == "watch" and tools["op"] == "tools"
    assert watch["fleet"] == tools["fleet"] == call["fleet"]
    assert watch["fleet"]["cwd"] == project
    assert watch["fleet"]["trust_project"] is True
    assert (call["tool"], call["arguments"]) == ("files/echo", {"message": "hi"})
    (hello,) = peer.hellos
    assert hello["kind"] == "control"


async def test_a_change_event_swaps_the_tools(
    tmp_path: Path, peer: ControlPeer, scripted: ScriptedFleet
) -> None:
    with anyio.fail_after(30):
        async with open_agent_session(tmp_path, daemon=True) as session:
            assert [t.name for t in session.tools] == ["mcp_files_echo"]
            scripted.tools = [tool_row("files", "echo"), tool_row("notes", "read")]
            scripted.errors = []
            peer.push_event("tools_changed")
            await wait_until(lambda: [t.name for t in session.tools] == ["mcp_files_echo", "mcp_notes_read"])
            assert session.mcp_errors == []
            # A tool that is gone from the document is gone from the session.
            scripted.tools = [tool_row("notes", "read")]
            peer.push_event("tools_changed")
            await wait_until(lambda: [t.name for t in session.tools] == ["mcp_notes_read"])
    assert [r["op"] for r in peer.requests] == ["watch", "tools", "tools", "tools"]


async def test_rows_missing_a_tool_name_are_skipped(
    tmp_path: Path, peer: ControlPeer, scripted: ScriptedFleet
) -> None:
    unnamed = [{**tool_row("files", "bad"), "name": None}, {**tool_row("files", "bad"), "mcp_name": ""}]
    scripted.tools = [{k: v for k, v in tool_row("files", "bad").items() if k != "server"}, *unnamed]
    scripted.tools.append(tool_row("files", "echo"))
    with anyio.fail_after(30):
        async with open_agent_session(tmp_path, daemon=True) as session:
            assert [t.name for t in session.tools] == ["mcp_files_echo"]
            # And after a change: the connection lives on, and so do the session's calls.
            scripted.tools = [*scripted.tools, tool_row("notes", "read")]
            peer.push_event("tools_changed")
            await wait_until(lambda: [t.name for t in session.tools] == ["mcp_files_echo", "mcp_notes_read"])
            called = await session.call_tool("mcp_notes_read", {"message": "still here"})
            assert called.text == "notes/read: still here"
    assert len(peer.hellos) == 1


async def test_a_daemon_gone_mid_call_is_an_error_result_and_the_next_call_reconnects(
    tmp_path: Path, peer: ControlPeer
) -> None:
    with anyio.fail_after(30):
        async with open_agent_session(tmp_path, daemon=True) as session:
            lost = await session.call_tool("mcp_files_echo", {"message": "vanish"})
            assert lost.is_error
            assert "the mcpfleet daemon stopped while this call ran; retry it" in lost.text
            again = await session.call_tool("mcp_files_echo", {"message": "back"})
            assert again.text == "files/echo: back"
    # The second connection watched and listed again before the call.
    assert [r["op"] for r in peer.requests] == ["watch", "tools", "call", "watch", "tools", "call"]
    assert len(peer.hellos) == 2


async def test_a_daemon_gone_while_listing_again_is_reconnected_to(
    tmp_path: Path, peer: ControlPeer, scripted: ScriptedFleet
) -> None:
    with anyio.fail_after(30):
        async with open_agent_session(tmp_path, daemon=True) as session:
            scripted.tools = [tool_row("notes", "read")]
            scripted.drop_next_listing = True
            peer.push_event("tools_changed")
            await wait_until(lambda: [t.name for t in session.tools] == ["mcp_notes_read"])
    assert [r["op"] for r in peer.requests] == ["watch", "tools", "tools", "watch", "tools"]
    assert len(peer.hellos) == 2


@pytest.mark.usefixtures("peer")
async def test_a_call_after_the_session_ended_fails_at_once(tmp_path: Path) -> None:
    async with open_agent_session(tmp_path, daemon=True) as session:
        (tool,) = session.tools
    # At once, not after waiting for a connection that will never come back (15 s).
    with anyio.fail_after(5):
        late = await tool.execute({"message": "too late"})
    assert late.is_error
    assert "this agent session has ended" in late.text


@pytest.mark.usefixtures("peer")
@pytest.mark.parametrize("daemon", [True, False], ids=["through-the-daemon", "in-process"])
async def test_an_error_in_the_block_comes_out_as_it_was_raised(tmp_path: Path, daemon: bool) -> None:
    with anyio.fail_after(30), pytest.raises(ValueError, match="the caller's own") as raised:
        async with open_agent_session(tmp_path, daemon=daemon):
            raise ValueError("the caller's own")
    assert type(raised.value) is ValueError


def test_a_daemon_session_used_through_an_integration_never_loads_the_sdk(tmp_path: Path) -> None:
    # The daemon runs the servers: this process speaks its control lines only, so the SDK
    # (0.6 s and more to import) stays unloaded, the integration's import included.
    pytest.importorskip("langchain_core")
    probe = textwrap.dedent(
        f"""
        import sys

        import anyio
        from tests.servers.control_peer import result
        from tests.servers.control_peer import control_peer

        from mcpfleet import open_agent_session
        from mcpfleet.daemon_client import paths
        from mcpfleet.integrations.langchain import open_langchain_tools

        def daemon(request):
            if request["op"] == "tools":
                return result(request, {{"tools": [{tool_row("files", "echo")!r}], "errors": []}})
            if request["op"] == "call":
                text = "echoed " + request["arguments"]["message"]
                return result(request, {{"text": text, "content": [{{"type": "text", "text": text}}]}})
            return result(request, {{}})

        async def main():
            async with open_agent_session({str(tmp_path)!r}, daemon=True) as session:
                async with open_langchain_tools(session=session) as tools:
                    print(await tools[0].ainvoke({{"message": "hi"}}))
            print("mcp" in sys.modules, [name for name in sys.modules if name.startswith("mcp.")])

        with control_peer(paths.socket_path(), daemon):
            anyio.run(main)
        """
    )
    shown = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == ["echoed hi", "False []"]


@pytest.mark.usefixtures("local_fleet")
@pytest.mark.parametrize("code", ["environment-mismatch", "refused"])
async def test_a_refusal_falls_back_to_a_fleet_of_this_process(
    tmp_path: Path, scripted: ScriptedFleet, caplog: pytest.LogCaptureFixture, code: str
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="mcpfleet.agent.session"),
        control_peer(paths.socket_path(), scripted, refusal=(code, "other config folders")),
        anyio.fail_after(60),
    ):
        async with open_agent_session(tmp_path, daemon=True) as session:
            assert [t.name for t in session.tools] == ["mcp_local_echo"]
            assert session.mcp_manager.get_connection_status("local") == "connected"
            called = await session.call_tool("mcp_local_echo", {"message": "here"})
            assert not called.is_error
    assert f"refused the connection ({code}): other config folders" in caplog.text
    assert "its MCP servers run in this process" in caplog.text


@pytest.mark.usefixtures("local_fleet")
async def test_mcpfleet_no_daemon_keeps_the_fleet_in_this_process(
    tmp_path: Path, peer: ControlPeer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCPFLEET_NO_DAEMON", "1")
    with anyio.fail_after(60):
        async with open_agent_session(tmp_path, daemon=True) as session:
            assert [t.name for t in session.tools] == ["mcp_local_echo"]
    assert peer.hellos == []


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"cache": None}, "cache"),
        ({"extra_config_paths": ["x.json"]}, "extra_config_paths"),
        ({"on_uncached": "late-join"}, "on_uncached"),
        (
            {"sampling_handler": object(), "elicitation_handler": object()},
            "elicitation_handler, sampling_handler",
        ),
    ],
)
def test_keywords_of_a_fleet_of_this_process_are_refused_with_daemon(
    tmp_path: Path, keywords: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError, match=f"daemon=True takes the fleet the daemon runs; {named} describe"):
        open_agent_session(tmp_path, daemon=True, **keywords)


def test_a_manager_of_ones_own_is_refused_with_daemon(tmp_path: Path) -> None:
    from mcpfleet import MCPManager

    with pytest.raises(ValueError, match="mcp_manager describe"):
        open_agent_session(tmp_path, daemon=True, mcp_manager=MCPManager(tmp_path))


@pytest.mark.parametrize("leaving", [None, "version-mismatch", "draining"])
async def test_a_daemon_is_started_when_none_runs_or_the_one_running_is_leaving(
    tmp_path: Path, scripted: ScriptedFleet, leaving: str | None
) -> None:
    with ExitStack() as peers:
        refusal = None if leaving is None else (leaving, "on its way out")
        old = (
            None
            if refusal is None
            else peers.enter_context(control_peer(paths.socket_path(), scripted, refusal=refusal))
        )
        started: list[ControlPeer] = []

        def start() -> None:
            if old is not None:
                old.close()
            started.append(peers.enter_context(control_peer(paths.socket_path(), scripted)))

        with anyio.fail_after(30):
            async with DaemonFleet(FleetSpec(cwd=str(tmp_path)), start=start) as fleet:
                assert [t.name for t in fleet.tools] == ["mcp_files_echo"]
        (new,) = started
        assert [r["op"] for r in new.requests] == ["watch", "tools"]
        assert len(old.hellos if old is not None else []) == (0 if leaving is None else 1)


async def test_a_daemon_still_leaving_after_the_start_is_not_started_again(
    tmp_path: Path, scripted: ScriptedFleet
) -> None:
    starts: list[None] = []
    with (
        control_peer(paths.socket_path(), scripted, refusal=("draining", "on its way out")) as leaving,
        pytest.raises(DaemonRefused, match="draining"),
        anyio.fail_after(30),
    ):
        async with DaemonFleet(FleetSpec(cwd=str(tmp_path)), start=lambda: starts.append(None)):
            pass
    assert len(starts) == 1
    assert len(leaving.hellos) == 2


async def test_a_daemon_that_keeps_going_away_is_given_up(
    tmp_path: Path, scripted: ScriptedFleet, caplog: pytest.LogCaptureFixture
) -> None:
    def list_then_go_away(request: dict[str, Any]) -> Reply | None:
        reply = scripted(request)
        return Reply(reply.lines, close=True) if request["op"] == "tools" and reply is not None else reply

    def start() -> None:
        raise AssertionError("a daemon is listening: nothing is to be started")

    with (
        caplog.at_level(logging.WARNING, logger="mcpfleet.agent.remote"),
        control_peer(paths.socket_path(), list_then_go_away) as peer,
        anyio.fail_after(60),
    ):
        async with DaemonFleet(FleetSpec(cwd=str(tmp_path)), start=start) as fleet:
            (tool,) = fleet.tools
            await wait_until(lambda: "this session no longer reaches it" in caplog.text)
            with anyio.fail_after(5):
                given_up = await tool.execute({"message": "anyone?"})
            # The tools stay as they were; calls fail at once, saying why.
            assert [t.name for t in fleet.tools] == ["mcp_files_echo"]
    assert given_up.is_error
    assert f"went away {RECONNECT_LIMIT + 1} times" in given_up.text
    assert len(peer.hellos) == RECONNECT_LIMIT + 1
    assert [r["op"] for r in peer.requests] == ["watch", "tools"] * (RECONNECT_LIMIT + 1)
