"""What the shared fleet promises its sessions, checked through a real ``mcpfleet daemon run`` over
its real socket: where each server runs (its process's working folder), that a session which did
not trust its project never sees the servers another session trusted there, that an edited entry
restarts its server and its sessions hear of it, and that a backend's sampling request reaches
the client of the session whose call caused it.

The sessions are the SDK's own ``Client`` on a transport of this file over the socket
(``daemon_transport``: the hello, then JSON-RPC lines both ways), so what a session answers
(sampling) and hears (``list_changed``) is what a host's SDK would.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.client.client import ConnectMode
from mcp.client.session import SamplingFnT
from mcp.shared.message import SessionMessage
from pydantic import FileUrl
from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import (
    ANSWER_TIMEOUT_S,
    control,
    fake,
    fleet_spec,
    hello,
    project_config,
    server_processes,
    session,
    user_config,
    wait_until_gone,
)
from tests.servers.fixtures import SERVERS_DIR

from mcpfleet.contract import wire
from mcpfleet.daemon_client import paths

pytestmark = pytest.mark.anyio

ASKING_SERVER = SERVERS_DIR / "asking_server.py"
MAX_LINE_BYTES = 16 * 1024 * 1024
"""The longest line the test's transport reads from the daemon (the gateway's message limit)."""
SETTLE_S = 60.0
"""Generous: how long a config edit may take to reach a session on a loaded machine."""


@asynccontextmanager
async def daemon_transport(spec: wire.FleetSpec) -> AsyncIterator[TransportStreams]:
    """The SDK's two message streams over one session connection to the daemon."""
    stream = await anyio.connect_unix(paths.socket_path())
    async with stream:
        await stream.send(hello("session", spec))
        lines = BufferedByteReceiveStream(stream)
        answer = json.loads(await lines.receive_until(b"\n", MAX_LINE_BYTES))
        assert answer.get("ok") is True, answer
        incoming, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, outgoing = anyio.create_memory_object_stream[SessionMessage](0)

        async def read() -> None:
            async with incoming:
                while True:
                    try:
                        line = await lines.receive_until(b"\n", MAX_LINE_BYTES)
                    except (anyio.EndOfStream, anyio.IncompleteRead):
                        return
                    message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    try:
                        await incoming.send(SessionMessage(message))
                    except anyio.BrokenResourceError:
                        # The client has left (its read end is closed): what the daemon sent
                        # meanwhile (a notification) has no one to reach.
                        return

        async def write() -> None:
            async with outgoing:
                async for message in outgoing:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stream.send(data.encode() + b"\n")

        async with anyio.create_task_group() as pumps:
            pumps.start_soon(read)
            pumps.start_soon(write)
            try:
                yield read_stream, write_stream
            finally:
                pumps.cancel_scope.cancel()


def daemon_client(spec: wire.FleetSpec, *, mode: ConnectMode = "legacy", **options: Any) -> Client:
    return Client(daemon_transport(spec), mode=mode, **options)


async def tool_names(client: Client) -> list[str]:
    return sorted(tool.name for tool in (await client.list_tools()).tools)


async def lists_within(client: Client, tool: str, within_s: float = SETTLE_S) -> None:
    """Wait until ``client``'s session lists ``tool``."""
    with anyio.fail_after(within_s):
        while True:
            if tool in await tool_names(client):
                return
            await anyio.sleep(0.1)


def echo(name: str, **fields: Any) -> dict[str, Any]:
    """A fake server entry with the one tool ``echo``."""
    return {**fake(name, "--tool", "echo"), **fields}


def working_folder(pid: int) -> Path:
    return Path(os.readlink(f"/proc/{pid}/cwd"))


def test_project_servers_run_in_their_project_and_user_servers_in_the_home(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    """Whatever the share: a user-level server runs in the neutral folder (the home), never in
    the project of the session that started it nor in the daemon's own folder; a project's
    server runs in its project."""
    project = tmp_path / "project"
    project.mkdir()
    user_config({"mine": echo("mine"), "mine_alone": echo("mine_alone", share="session")})
    project_config(project, {"local": echo("local"), "local_alone": echo("local_alone", share="session")})
    start_daemon()
    with session(fleet_spec(project, trust_project=True)) as host:
        assert host.tool_names() == ["local_alone_echo", "local_echo", "mine_alone_echo", "mine_echo"]
        folders = {
            name: [working_folder(pid) for pid in server_processes(isolated_home, name)]
            for name in ("mine", "mine_alone", "local", "local_alone")
        }
        with control() as link:
            shares = {row["name"]: row["share"] for row in link.control("status")["result"]["servers"]}
    home, root = isolated_home.resolve(), project.resolve()
    assert Path.cwd().resolve() not in (home, root)  # the daemon's own folder is neither
    assert folders == {"mine": [home], "mine_alone": [home], "local": [root], "local_alone": [root]}
    assert shares == {"mine": "user", "mine_alone": "session", "local": "project", "local_alone": "session"}


def test_a_session_that_did_not_trust_its_project_never_sees_what_another_session_trusted(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    """Trust is a session's, not its project's: a session without ``--trust-project`` (and no
    approval) sees only the user's servers, while a trusting session in the same folder runs
    the project's server."""
    project = tmp_path / "project"
    project.mkdir()
    user_config({"mine": echo("mine")})
    project_config(project, {"local": echo("local")})
    start_daemon()
    with session(fleet_spec(project, trust_project=True), host="trusting") as trusting:
        assert trusting.tool_names() == ["local_echo", "mine_echo"]
        [local] = server_processes(isolated_home, "local")
        with session(fleet_spec(project), host="wary") as wary:
            assert wary.tool_names() == ["mine_echo"]
            refused = wary.call_tool("local_echo", {"message": "not mine"})
            assert "Unknown tool: local_echo" in refused["error"]["message"], refused
            assert server_processes(isolated_home, "local") == [local]
            with control() as link:
                rows = link.control("status")["result"]["servers"]
            assert sorted((row["name"], row["sessions"]) for row in rows) == [("local", 1), ("mine", 2)]
            # The trusting session's use of the server changes nothing for the wary one.
            answer = trusting.call_tool("local_echo", {"message": "mine"})
            assert answer["result"]["structuredContent"] == {"message": "mine"}
            assert wary.tool_names() == ["mine_echo"]


async def test_an_edited_entry_restarts_its_server_and_its_sessions_hear_of_it(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    """An arg of a running shared server changed: the old process stops, a new one runs the new
    entry, and every session using it is told ``tools/list_changed`` and lists the new tool."""
    projects = [tmp_path / "one", tmp_path / "two"]
    for project in projects:
        project.mkdir()
    user_config({"alpha": echo("alpha")})
    start_daemon()
    heard: list[list[Any]] = [[], []]

    def collector(index: int) -> Any:
        async def on_message(message: Any) -> None:
            heard[index].append(message)

        return on_message

    with anyio.fail_after(SETTLE_S * 2):
        async with (
            daemon_client(fleet_spec(projects[0]), message_handler=collector(0)) as one,
            daemon_client(fleet_spec(projects[1]), message_handler=collector(1)) as two,
        ):
            assert await tool_names(one) == await tool_names(two) == ["alpha_echo"]
            [before] = server_processes(isolated_home, "alpha")

            user_config({"alpha": fake("alpha", "--tool", "echo", "--tool", "add")})
            for client in (one, two):
                await lists_within(client, "alpha_add")
            assert not wait_until_gone([before]), "the edited entry's old process still runs"
            [after] = server_processes(isolated_home, "alpha")
            assert after != before
            result = await two.call_tool("alpha_add", {"a": 40, "b": 2})
            assert result.structured_content == {"sum": 42}
    for messages in heard:
        assert any(isinstance(message, mcp_types.ToolListChangedNotification) for message in messages)


def text_of(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent), block
    return block.text


def asking(name: str, *flags: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(ASKING_SERVER), "--name", name, *flags]}


def answer_as(model: str, params: mcp_types.CreateMessageRequestParams) -> mcp_types.CreateMessageResult:
    """``<prompt>!`` from the model ``model``."""
    prompt = params.messages[0].content
    text = prompt.text if isinstance(prompt, mcp_types.TextContent) else "?"
    return mcp_types.CreateMessageResult(
        role="assistant", content=mcp_types.TextContent(type="text", text=f"{text}!"), model=model
    )


def sampling_as(model: str) -> SamplingFnT:
    """A sampling callback answering ``<prompt>!`` from the model ``model``."""

    async def sample(
        context: Any, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult:
        return answer_as(model, params)

    return sample


@pytest.mark.parametrize("client_mode", ["legacy", "2026-07-28"])
async def test_a_backends_sampling_request_is_answered_by_the_client_of_the_calling_session(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path, client_mode: ConnectMode
) -> None:
    """Two sessions share a handshake-era and a 2026-07-28 asking server; each session's call
    is sampled by its own client, over the socket."""
    projects = [tmp_path / "one", tmp_path / "two"]
    for project in projects:
        project.mkdir()
    user_config({"old": asking("old", "--legacy"), "new": asking("new")})
    start_daemon()
    with anyio.fail_after(ANSWER_TIMEOUT_S * 2):
        async with (
            daemon_client(
                fleet_spec(projects[0]), mode=client_mode, sampling_callback=sampling_as("one")
            ) as one,
            daemon_client(
                fleet_spec(projects[1]), mode=client_mode, sampling_callback=sampling_as("two")
            ) as two,
        ):
            for server in ("old", "new"):
                for client, model in ((one, "one"), (two, "two")):
                    result = await client.call_tool(f"{server}_sample", {"prompt": f"{server} to {model}"})
                    assert text_of(result) == f"sampled {server} to {model}! from {model}", result
            # One backend each, shared by both sessions: the question went to the caller's client.
            with control() as link:
                rows = link.control("status")["result"]["servers"]
            assert sorted((row["name"], row["share"], row["sessions"]) for row in rows) == [
                ("new", "user", 2),
                ("old", "user", 2),
            ]


class Asked:
    """What one session's client was asked, and the answers it gives: ``<what> to <model>``."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.questions: list[str] = []

    async def sample(
        self, context: Any, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult:
        self.questions.append("sample")
        return answer_as(self.model, params)

    async def elicit(self, context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
        self.questions.append("elicit")
        return mcp_types.ElicitResult(action="accept", content={"answer": f"secret of {self.model}"})

    async def roots(self, context: Any) -> mcp_types.ListRootsResult:
        self.questions.append("roots")
        return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=FileUrl(f"file:///{self.model}"))])

    def callbacks(self) -> dict[str, Any]:
        return {
            "sampling_callback": self.sample,
            "elicitation_callback": self.elicit,
            "list_roots_callback": self.roots,
        }


async def unprompted_outcomes(report: Path, pid: int) -> dict[str, str]:
    """Have the asking server (``pid``) ask its three questions outside any call; their outcomes."""
    os.kill(pid, signal.SIGUSR1)
    with anyio.fail_after(ANSWER_TIMEOUT_S):
        while True:
            path = anyio.Path(report)
            lines = (await path.read_text()).splitlines() if await path.exists() else []
            if len(lines) == 3:
                return {line["asked"]: line["outcome"] for line in map(json.loads, lines)}
            await anyio.sleep(0.1)


def asking_pid(name: str) -> int:
    with control() as link:
        (row,) = [row for row in link.control("status")["result"]["servers"] if row["name"] == name]
    assert isinstance(row["pid"], int), row
    return row["pid"]


async def test_a_shared_servers_question_with_no_call_in_flight_reaches_no_session(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    """A user-level server used by sessions of two projects asks for a completion, a password
    and roots with no call in flight: nobody can tell whose question it is, so each is refused
    to the server, neither session is asked, and the daemon log says so naming the server."""
    projects = [tmp_path / "one", tmp_path / "two"]
    for project in projects:
        project.mkdir()
    report = tmp_path / "unprompted.jsonl"
    user_config({"ask": asking("ask", "--legacy", "--unprompted", str(report))})
    start_daemon()
    one, two = Asked("one"), Asked("two")
    with anyio.fail_after(ANSWER_TIMEOUT_S * 2):
        async with (
            daemon_client(fleet_spec(projects[0]), **one.callbacks()) as first,
            daemon_client(fleet_spec(projects[1]), **two.callbacks()) as second,
        ):
            for client in (first, second):
                await lists_within(client, "ask_sample")
            # Roots asked when a client connected may have reached the one session there was.
            answered_before = {"one": list(one.questions), "two": list(two.questions)}
            outcomes = await unprompted_outcomes(report, asking_pid("ask"))
            assert one.questions == answered_before["one"] and two.questions == answered_before["two"]
            assert not {"sample", "elicit"} & {*one.questions, *two.questions}
    assert sorted(outcomes) == ["elicit", "roots", "sample"]
    for outcome in outcomes.values():
        assert outcome.startswith("refused -32600 "), outcomes
        assert 'the MCP server "ask" asked with no call in flight and 2 sessions use it' in outcome
    log = paths.log_path().read_text()
    for method in ("sampling/createMessage", "elicitation/create", "roots/list"):
        assert f'{method} refused: the MCP server "ask" asked with no call in flight' in log


async def test_a_servers_question_with_no_call_in_flight_reaches_the_one_session_that_uses_it(
    isolated_home: Path, start_daemon: StartDaemon, tmp_path: Path
) -> None:
    report = tmp_path / "unprompted.jsonl"
    user_config({"ask": asking("ask", "--legacy", "--unprompted", str(report))})
    start_daemon()
    one = Asked("one")
    with anyio.fail_after(ANSWER_TIMEOUT_S * 2):
        async with daemon_client(fleet_spec(tmp_path), **one.callbacks()) as first:
            await lists_within(first, "ask_sample")
            outcomes = await unprompted_outcomes(report, asking_pid("ask"))
    assert outcomes == {
        "sample": "sampled unprompted! from one",
        "elicit": 'elicited accept {"answer": "secret of one"}',
        "roots": 'roots ["file:///one"]',
    }
