"""The daemon's shared fleet: who shares which backend, lifetimes, questions, config edits, status.

Everything runs in this process: one ``SharedFleet``, a ``Gateway`` per attached view and an
SDK ``Client`` per session over memory streams, as the daemon serves a host session. The
backends are real subprocesses (``tests/servers``); ``fake_server.py --pid-dir DIR`` leaves
one file per process it ever started, which is how processes are counted.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from pydantic import FileUrl
from tests.integration.gateway.gateway_harness import wait_until
from tests.servers.fixtures import FAKE_SERVER, SERVERS_DIR

from mcpfleet import paths
from mcpfleet.config import load_all_mcp_configs
from mcpfleet.config.approval import ApprovalStore, approve_project_servers
from mcpfleet.config.model import DiscoveryResult
from mcpfleet.config.profiles import DaemonSettings, read_gateway_settings
from mcpfleet.contract.wire import FleetSpec
from mcpfleet.daemon import discoveries as discoveries_module
from mcpfleet.daemon.fleet import SharedFleet
from mcpfleet.daemon.view import FleetView
from mcpfleet.errors import ServerNotConnectedError
from mcpfleet.fleet.registry import Phase
from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
from mcpfleet.gateway.handlers import build_server
from mcpfleet.gateway.relay import Relay

pytestmark = pytest.mark.anyio

ASKING_SERVER = SERVERS_DIR / "asking_server.py"
SETTLE_S = 20.0


def fake(name: str, pid_dir: Path, *flags: str, **fields: Any) -> dict[str, Any]:
    """A fake server entry that leaves one file per process in ``pid_dir``."""
    pid_dir.mkdir(parents=True, exist_ok=True)
    args = [str(FAKE_SERVER), "--name", name, "--tool", "echo", "--pid-dir", str(pid_dir), *flags]
    return {"command": sys.executable, "args": args, **fields}


def started(pid_dir: Path) -> int:
    """How many processes of that server were ever started."""
    return len(os.listdir(pid_dir)) if pid_dir.is_dir() else 0


def alive(pid_dir: Path) -> list[int]:
    return [int(name) for name in os.listdir(pid_dir) if _alive(int(name))] if pid_dir.is_dir() else []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def write_user_servers(servers: dict[str, dict[str, Any]]) -> None:
    path = paths.user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))


def write_project_servers(root: Path, servers: dict[str, dict[str, Any]]) -> Path:
    """The project's servers, unconfined unless an entry says otherwise: their pid files name
    host pids, which a sandbox's pid namespace would not (the daemon's sandboxed servers have
    their own test, ``test_daemon_sandbox.py``)."""
    path = paths.project_config_file(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    unconfined = {name: {"sandbox": False, **entry} for name, entry in servers.items()}
    path.write_text(json.dumps({"mcpServers": unconfined}))
    return path


@dataclass
class Session:
    view: FleetView
    client: Client
    notifications: list[Any]

    async def tool_names(self) -> list[str]:
        return sorted(tool.name for tool in (await self.client.list_tools()).tools)

    async def echo(self, tool: str) -> str:
        result = await self.client.call_tool(tool, {"message": "hi"})
        assert not result.is_error, result
        block = result.content[0]
        assert isinstance(block, mcp_types.TextContent)
        return block.text


@asynccontextmanager
async def session(
    fleet: SharedFleet,
    root: Path,
    session_id: str,
    *,
    startup_timeout_ms: int = 0,
    profile: str | None = None,
    mode: str = "legacy",
    trust_project: bool = True,
    **client_options: Any,
) -> AsyncIterator[Session]:
    """One host session as the daemon serves it: a view, its gateway, a client on it."""
    notifications: list[Any] = []

    async def on_message(message: Any) -> None:
        notifications.append(message)

    spec = FleetSpec(
        cwd=str(root), trust_project=trust_project, startup_timeout_ms=startup_timeout_ms, profile=profile
    )

    def session_view(relay: Relay) -> AbstractAsyncContextManager[FleetView]:
        return fleet.attach(
            spec,
            session_id=session_id,
            host="pytest",
            profile=read_gateway_settings().profile(profile) if profile is not None else None,
            relay=relay,
        )

    async with (
        open_gateway(session_view, GatewayOptions()) as gateway,
        Client(build_server(gateway), mode=mode, message_handler=on_message, **client_options) as client,
    ):
        assert isinstance(gateway.fleet, FleetView)
        yield Session(gateway.fleet, client, notifications)


def rows(fleet: SharedFleet, name: str) -> list[dict[str, Any]]:
    return [row for row in fleet.status() if row["name"] == name]


@pytest.fixture
def projects(tmp_path: Path) -> tuple[Path, Path]:
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    alpha.mkdir()
    beta.mkdir()
    return alpha, beta


async def test_a_view_sends_each_request_to_the_scope_that_runs_its_server(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path]
) -> None:
    """The view's per-server surface is the manager's, routed by the server's name, whether it
    is passed by position or by keyword: each request reaches the backend of the session's own
    project; a server the session does not see answers as disconnected, and a request to it
    raises ``ServerNotConnectedError``."""
    alpha, beta = projects
    pids = tmp_path / "pids"
    write_project_servers(alpha, {"builder": fake("builder", pids / "alpha-builder")})
    write_project_servers(beta, {"builder": fake("builder", pids / "beta-builder")})
    async with (
        SharedFleet(DaemonSettings(), cache=None) as fleet,
        session(fleet, alpha, "a") as a,
        session(fleet, beta, "b") as b,
    ):
        for each, root in ((a, alpha), (b, beta)):
            await each.view.wait_for_connection("builder")
            assert each.view.get_connection_status(name="builder") == "connected"
            state = each.view.get_server_state("builder")
            assert state.pid is not None and state.pid in alive(pids / f"{root.name}-builder")
            by_keyword = await each.view.call_tool(
                server_name="builder", tool_name="echo", arguments={"message": root.name}
            )
            assert [block.text for block in by_keyword.content] == [root.name]
        assert a.view.get_connection_status("missing") == "disconnected"
        assert a.view.get_server_state("missing").state == Phase.DISCONNECTED
        assert a.view.get_connection("missing") is None
        assert a.view.get_timings("missing") == {}
        assert not a.view.is_deferred("missing")
        with pytest.raises(ServerNotConnectedError):
            await a.view.call_tool("missing", "echo", {"message": "hi"})
        with pytest.raises(ServerNotConnectedError):
            await a.view.list_prompts(server="missing")


async def test_user_servers_run_once_project_servers_once_per_project_session_ones_per_session(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path]
) -> None:
    alpha, beta = projects
    pids = tmp_path / "pids"
    write_user_servers(
        {
            "common": fake("common", pids / "common"),
            "mine": fake("mine", pids / "mine", share="session"),
        }
    )
    write_project_servers(
        alpha, {"builder": fake("builder", pids / "alpha-builder"), "only_a": fake("only_a", pids / "only_a")}
    )
    write_project_servers(
        beta, {"builder": fake("builder", pids / "beta-builder"), "only_b": fake("only_b", pids / "only_b")}
    )
    async with SharedFleet(DaemonSettings(), cache=None) as fleet, AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(session(fleet, root, f"{root.name}-{index}"))
            for root, count in ((alpha, 3), (beta, 2))
            for index in range(count)
        ]
        for each in sessions:
            own, other = ("only_a", "only_b") if each.view.project == str(alpha) else ("only_b", "only_a")
            names = await each.tool_names()
            assert names == sorted(["builder_echo", "common_echo", "mine_echo", f"{own}_echo"])
            assert f"{other}_echo" not in names
            assert await each.echo("builder_echo") == "hi"
        assert started(pids / "common") == 1
        assert started(pids / "alpha-builder") == 1
        assert started(pids / "beta-builder") == 1
        assert started(pids / "only_a") == 1
        assert started(pids / "only_b") == 1
        assert started(pids / "mine") == 5

        (common,) = rows(fleet, "common")
        assert (common["share"], common["sessions"], common["project"]) == ("user", 5, None)
        assert common["state"] == "connected"
        assert common["pid"] in alive(pids / "common")
        assert common["rss_bytes"] > 0
        assert common["idle_s"] == 0.0
        builders = sorted((row["project"], row["share"], row["sessions"]) for row in rows(fleet, "builder"))
        assert builders == [(str(alpha), "project", 3), (str(beta), "project", 2)]
        assert sorted((row["share"], row["sessions"]) for row in rows(fleet, "mine")) == [("session", 1)] * 5
    for folder in pids.iterdir():
        assert alive(folder) == [], f"{folder.name} left running"


async def test_a_project_entry_that_asks_to_be_shared_by_every_session_is_refused(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path]
) -> None:
    alpha, _ = projects
    pids = tmp_path / "pids"
    config = write_project_servers(alpha, {"greedy": fake("greedy", pids / "greedy", share="user")})
    async with SharedFleet(DaemonSettings(), cache=None) as fleet, session(fleet, alpha, "s") as one:
        assert await one.tool_names() == []
        (error,) = one.view.discover().errors
        assert error.subject == str(config)
        assert str(config) in error.error
        assert '"share": "user" is for user-level entries only' in error.error
        assert rows(fleet, "greedy") == []
    assert started(pids / "greedy") == 0


async def test_servers_start_when_a_session_needs_them_and_stop_when_idle_unless_kept_warm(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path]
) -> None:
    """Nothing runs before a session needs it; an unused server stops after its idle timeout,
    a ``keepWarm`` one does not; a later session starts it again, its tools from the cache
    while it is still starting."""
    alpha, _ = projects
    pids = tmp_path / "pids"
    gate = tmp_path / "lazy-may-start"
    gate.touch()
    lazy_entry = fake("lazy", pids / "lazy", "--start-when-exists", str(gate), idleTimeout=0.5)
    write_user_servers(
        {"lazy": lazy_entry, "warm": fake("warm", pids / "warm", keepWarm=True, idleTimeout=0.5)}
    )
    async with SharedFleet(
        DaemonSettings(idle_timeout_s=600), cache="default", watch_interval_s=0.05
    ) as fleet:
        await anyio.sleep(0.3)
        assert fleet.status() == []
        assert started(pids / "lazy") == started(pids / "warm") == 0
        async with session(fleet, alpha, "first") as first:
            assert await first.echo("lazy_echo") == "hi"
            assert started(pids / "lazy") == started(pids / "warm") == 1
        # No session: "lazy" idles out after 0.5 s, "warm" stays.
        await wait_until(lambda: rows(fleet, "lazy") == [] and alive(pids / "lazy") == [], timeout_s=SETTLE_S)
        (warm,) = rows(fleet, "warm")
        assert warm["state"] == "connected"
        assert warm["sessions"] == 0
        assert warm["keep_warm"] is True
        assert warm["idle_s"] > 0.5
        assert len(alive(pids / "warm")) == 1

        gate.unlink()  # the restarted "lazy" hangs before its handshake until the gate is back
        async with session(fleet, alpha, "second", startup_timeout_ms=100) as second:
            assert await second.tool_names() == ["lazy_echo", "warm_echo"]
            (lazy,) = rows(fleet, "lazy")
            assert lazy["state"] == "connecting"
            gate.touch()
            assert await second.echo("lazy_echo") == "hi"
        assert started(pids / "lazy") == 2
        assert started(pids / "warm") == 1

        # No longer kept warm: it idles out like the others, without a restart meanwhile.
        write_user_servers({"lazy": lazy_entry, "warm": fake("warm", pids / "warm", idleTimeout=0.5)})
        await wait_until(lambda: rows(fleet, "warm") == [] and alive(pids / "warm") == [], timeout_s=SETTLE_S)
        assert started(pids / "warm") == 1


def asking(name: str, *flags: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(ASKING_SERVER), "--name", name, *flags]}


def sampling_as(who: str, hold: anyio.Event | None = None, entered: anyio.Event | None = None) -> Any:
    """A sampling callback answering as ``who``; with ``hold``, it answers once that is set."""

    async def sample(
        context: Any, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult:
        if entered is not None:
            entered.set()
        if hold is not None:
            with anyio.fail_after(SETTLE_S):
                await hold.wait()
        prompt = params.messages[0].content
        text = prompt.text if isinstance(prompt, mcp_types.TextContent) else ""
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text=f"{text}, says {who}"),
            model=who,
        )

    return sample


def text_of(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent), block
    return block.text


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_shared_servers_question_reaches_the_session_whose_call_caused_it(
    isolated_home: Path, projects: tuple[Path, Path], era: str
) -> None:
    alpha, beta = projects
    flags = ("--legacy",) if era == "legacy" else ()
    write_user_servers({"ask": asking("ask", *flags)})
    async with (
        SharedFleet(DaemonSettings(), cache=None) as fleet,
        session(fleet, alpha, "a", sampling_callback=sampling_as("A")) as a,
        session(fleet, beta, "b", sampling_callback=sampling_as("B")) as b,
    ):
        (row,) = rows(fleet, "ask")
        assert row["sessions"] == 2
        for _ in range(2):
            assert (
                text_of(await b.client.call_tool("ask_sample", {"prompt": "to B"}))
                == "sampled to B, says B from B"
            )
            assert (
                text_of(await a.client.call_tool("ask_sample", {"prompt": "to A"}))
                == "sampled to A, says A from A"
            )


async def test_a_question_that_cannot_be_tied_to_one_session_is_refused_and_the_server_goes_per_session(
    isolated_home: Path, projects: tuple[Path, Path]
) -> None:
    """Two sessions with calls in flight on one handshake-era backend: its next question could
    be either's. It is refused, and each session gets a backend of its own from then on."""
    alpha, beta = projects
    write_user_servers({"ask": asking("ask", "--legacy")})
    hold, entered = anyio.Event(), anyio.Event()
    async with (
        SharedFleet(DaemonSettings(), cache=None) as fleet,
        session(fleet, alpha, "a", sampling_callback=sampling_as("A", hold, entered)) as a,
        session(fleet, beta, "b", sampling_callback=sampling_as("B")) as b,
    ):
        answers: dict[str, str] = {}

        async def call_a() -> None:
            answers["A"] = text_of(await a.client.call_tool("ask_sample", {"prompt": "to A"}))

        async with anyio.create_task_group() as calls:
            calls.start_soon(call_a)
            with anyio.fail_after(SETTLE_S):
                await entered.wait()  # A's call is in flight, its question held by A's client
            answers["B"] = text_of(await b.client.call_tool("ask_sample", {"prompt": "to B"}))
            hold.set()
        assert answers["A"] == "sampled to A, says A from A"
        assert answers["B"].startswith("refused -32600 ")
        assert "cannot be tied to one of them" in answers["B"]

        def each_session_has_a_backend_of_its_own() -> bool:
            # The shared backend both left is used by nobody now: whether it is still listed
            # depends on how soon it is retired (on a loaded machine, before the first look).
            per_session = [row for row in rows(fleet, "ask") if row["share"] == "session"]
            return len(per_session) == 2 and all(row["sessions"] == 1 for row in per_session)

        await wait_until(each_session_has_a_backend_of_its_own)
        assert (
            text_of(await b.client.call_tool("ask_sample", {"prompt": "to B"}))
            == "sampled to B, says B from B"
        )
        assert (
            text_of(await a.client.call_tool("ask_sample", {"prompt": "to A"}))
            == "sampled to A, says A from A"
        )
        per_session = json.loads((paths.user_state_dir() / "daemon-per-session.json").read_text())
        assert [server["name"] for server in per_session["servers"]] == ["ask"]

    # A new daemon knows it: the server is per session from the start.
    async with SharedFleet(DaemonSettings(), cache=None) as fleet, session(fleet, alpha, "c"):
        assert [row["share"] for row in rows(fleet, "ask")] == ["session"]


async def test_a_sessions_new_roots_reach_its_servers_in_every_scope(
    isolated_home: Path, projects: tuple[Path, Path]
) -> None:
    """A session's client says its roots changed: its handshake-era servers in the user
    scope and in the project scope each hear it, ask again, and get the new roots from it."""
    alpha, _ = projects
    write_user_servers({"everyone": asking("everyone", "--legacy")})
    write_project_servers(alpha, {"near": asking("near", "--legacy")})
    root = ["file:///before"]

    async def list_roots(context: Any) -> mcp_types.ListRootsResult:
        return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri=FileUrl(root[0]), name="project")])

    async def asked_again(each: Session, server: str) -> bool:
        answer = text_of(await each.client.call_tool(f"{server}_roots_changes", {}))
        return answer.endswith('last ["file:///after"]')

    async with (
        SharedFleet(DaemonSettings(), cache=None) as fleet,
        session(fleet, alpha, "s", list_roots_callback=list_roots) as one,
    ):
        assert sorted(row["share"] for row in fleet.status()) == ["project", "user"]
        root[0] = "file:///after"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await one.client.session.send_roots_list_changed()
        await wait_until(lambda: asked_again(one, "everyone"))
        await wait_until(lambda: asked_again(one, "near"))


async def test_a_config_edit_reaches_the_sessions_that_see_the_server(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path]
) -> None:
    """A server added to one project: that project's sessions are told their tools changed,
    the other project's are not; removed, it stops; a user server added reaches everyone."""
    alpha, beta = projects
    pids = tmp_path / "pids"
    write_user_servers({"common": fake("common", pids / "common")})
    write_project_servers(alpha, {})
    async with (
        SharedFleet(DaemonSettings(), cache=None, watch_interval_s=0.05) as fleet,
        session(fleet, alpha, "a") as a,
        session(fleet, beta, "b") as b,
    ):
        write_project_servers(alpha, {"added": fake("added", pids / "added")})
        await wait_until(lambda: _listed(a, "added_echo"))
        assert await a.echo("added_echo") == "hi"
        assert any(isinstance(note, mcp_types.ToolListChangedNotification) for note in a.notifications)
        assert not any(isinstance(note, mcp_types.ToolListChangedNotification) for note in b.notifications)
        assert await b.tool_names() == ["common_echo"]

        write_project_servers(alpha, {})
        await wait_until(lambda: rows(fleet, "added") == [] and alive(pids / "added") == [])
        assert await a.tool_names() == ["common_echo"]

        write_user_servers(
            {"common": fake("common", pids / "common"), "later": fake("later", pids / "later")}
        )
        await wait_until(lambda: _listed(a, "later_echo"))
        await wait_until(lambda: _listed(b, "later_echo"))
        assert any(isinstance(note, mcp_types.ToolListChangedNotification) for note in b.notifications)
        assert started(pids / "later") == 1
        assert started(pids / "common") == 1


async def _listed(each: Session, tool: str) -> bool:
    return tool in await each.tool_names()


async def test_one_config_edit_reads_each_discovery_once_off_the_event_loop(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two projects in use: an edit of the user's file, which all six discoveries read
    (the user's and each project's, each once with no values, its reference, and once with
    the sessions' values), reads each of them once, in a worker thread (a large
    ``~/.claude.json`` would stall every session for the time it takes)."""
    alpha, beta = projects
    pids = tmp_path / "pids"
    common = fake("common", pids / "common")
    write_user_servers({"common": common})
    discovered_on: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> DiscoveryResult:
        discovered_on.append(threading.get_ident())
        return load_all_mcp_configs(*args, **kwargs)

    monkeypatch.setattr(discoveries_module, "load_all_mcp_configs", counted)
    event_loop_thread = threading.get_ident()
    interval_s = 0.05
    async with (
        SharedFleet(DaemonSettings(), cache=None, watch_interval_s=interval_s) as fleet,
        session(fleet, alpha, "a") as a,
        session(fleet, beta, "b") as b,
    ):
        assert len(discovered_on) == 6
        write_user_servers({"common": common, "later": fake("later", pids / "later")})
        await wait_until(lambda: _listed(a, "later_echo"))
        await wait_until(lambda: _listed(b, "later_echo"))
        await anyio.sleep(40 * interval_s)  # time for any other reload of the same edit
        assert len(discovered_on) == 6 + 6
    assert event_loop_thread not in discovered_on


async def test_a_discovery_read_across_a_config_change_is_read_again(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session attaching with a profile while the user's file changes: the discovery it
    read before the change is not the one it gets."""
    alpha, _ = projects
    pids = tmp_path / "pids"
    path = paths.user_config_file()
    path.parent.mkdir(parents=True)
    common = fake("common", pids / "common")
    profiles = {"narrow": {"servers": ["common", "later"]}}
    path.write_text(json.dumps({"mcpServers": {"common": common}, "profiles": profiles}))
    read, release = threading.Event(), threading.Event()

    def held(*args: Any, entry_filter: Any = None, **kwargs: Any) -> DiscoveryResult:
        result = load_all_mcp_configs(*args, entry_filter=entry_filter, **kwargs)
        if entry_filter is not None and not release.is_set():  # the profile's first discovery
            read.set()
            release.wait(SETTLE_S)
        return result

    monkeypatch.setattr(discoveries_module, "load_all_mcp_configs", held)
    seen: list[list[str]] = []

    async def attach_narrow(fleet: SharedFleet) -> None:
        async with session(fleet, alpha, "narrow", profile="narrow") as narrow:
            seen.append(await narrow.tool_names())

    async with (
        SharedFleet(DaemonSettings(), cache=None, watch_interval_s=0.05) as fleet,
        session(fleet, alpha, "wide") as wide,
        anyio.create_task_group() as attaching,
    ):
        attaching.start_soon(attach_narrow, fleet)
        try:
            assert await anyio.to_thread.run_sync(read.wait, SETTLE_S)
            servers = {"common": common, "later": fake("later", pids / "later")}
            path.write_text(json.dumps({"mcpServers": servers, "profiles": profiles}))
            await wait_until(lambda: _listed(wide, "later_echo"))
        finally:
            release.set()
    assert seen == [["common_echo", "later_echo"]]


async def test_approving_and_revoking_a_project_server_reaches_the_running_daemon(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path]
) -> None:
    """``mcpfleet approve`` while a session runs: that session and the next see the server;
    ``mcpfleet revoke``: it goes away and stops."""
    alpha, _ = projects
    pids = tmp_path / "pids"
    write_project_servers(alpha, {"built": fake("built", pids / "built")})
    async with (
        SharedFleet(DaemonSettings(), cache=None, watch_interval_s=0.05) as fleet,
        session(fleet, alpha, "first", trust_project=False) as first,
    ):
        assert await first.tool_names() == []
        (pending,) = first.view.discover().entries
        assert pending.state == "pending-approval"

        approved, unknown = approve_project_servers(first.view.discover().entries, ["built"])
        assert (len(approved), unknown) == (1, [])
        await wait_until(lambda: _listed(first, "built_echo"))
        assert await first.echo("built_echo") == "hi"
        async with session(fleet, alpha, "second", trust_project=False) as second:
            assert await second.tool_names() == ["built_echo"]

        assert ApprovalStore().revoke_in_project(alpha, "built") == 1
        await wait_until(lambda: rows(fleet, "built") == [] and alive(pids / "built") == [])
        assert await first.tool_names() == []
    assert started(pids / "built") == 1


async def test_a_user_server_that_names_the_workspace_runs_once_per_project(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path]
) -> None:
    """Cursor's ``${workspaceFolder}`` in a user-level entry: sharing one backend would hand one
    project's folder to the other's sessions, so each project gets its own."""
    alpha, beta = projects
    pids = tmp_path / "pids"
    entry = fake("files", pids / "files", "--tool", "env", env={"ROOT": "${workspaceFolder}"})
    cursor_file = isolated_home / ".cursor" / "mcp.json"
    cursor_file.parent.mkdir()
    cursor_file.write_text(json.dumps({"mcpServers": {"files": entry}}))
    async with (
        SharedFleet(DaemonSettings(), cache=None) as fleet,
        session(fleet, alpha, "a1") as a1,
        session(fleet, alpha, "a2") as a2,
        session(fleet, beta, "b") as b,
    ):
        for each, root in ((a1, alpha), (a2, alpha), (b, beta)):
            result = await each.client.call_tool("files_env", {"name": "ROOT"})
            assert result.structured_content is not None
            assert result.structured_content["value"] == str(root)
        shared = sorted((row["share"], row["project"], row["sessions"]) for row in rows(fleet, "files"))
        assert shared == [("project", str(alpha), 2), ("project", str(beta), 1)]
    assert started(pids / "files") == 2


async def test_a_session_with_a_profile_sees_and_starts_only_its_servers(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path]
) -> None:
    alpha, _ = projects
    pids = tmp_path / "pids"
    path = paths.user_config_file()
    path.parent.mkdir(parents=True)
    servers = {"common": fake("common", pids / "common"), "other": fake("other", pids / "other")}
    path.write_text(json.dumps({"mcpServers": servers, "profiles": {"narrow": {"servers": ["common"]}}}))
    async with SharedFleet(DaemonSettings(), cache=None) as fleet:
        async with session(fleet, alpha, "narrow", profile="narrow") as narrow:
            assert await narrow.tool_names() == ["common_echo"]
            (left_out,) = [entry for entry in narrow.view.discover().entries if entry.name == "other"]
            assert left_out.state == "filtered"
            assert started(pids / "other") == 0
            async with session(fleet, alpha, "wide") as wide:
                assert await wide.tool_names() == ["common_echo", "other_echo"]
            assert rows(fleet, "common")[0]["sessions"] == 1
        assert started(pids / "common") == started(pids / "other") == 1


async def test_a_profile_serving_one_of_two_twin_entries_serves_that_one(
    isolated_home: Path, tmp_path: Path, projects: tuple[Path, Path]
) -> None:
    """``gh`` and ``github`` name the same server, so discovery shadows the second as the
    first's twin. A profile that serves ``github`` only gets ``github`` (the profile filters
    within discovery, as in-process), and a session without it still gets ``gh``."""
    alpha, _ = projects
    pids = tmp_path / "pids"
    path = paths.user_config_file()
    path.parent.mkdir(parents=True)
    twin = fake("twin", pids / "twin")
    profiles = {"narrow": {"servers": ["github"]}}
    path.write_text(json.dumps({"mcpServers": {"gh": twin, "github": twin}, "profiles": profiles}))
    async with (
        SharedFleet(DaemonSettings(), cache=None, watch_interval_s=0.05) as fleet,
        session(fleet, alpha, "narrow", profile="narrow") as narrow,
    ):
        assert await narrow.tool_names() == ["github_echo"]
        assert await narrow.echo("github_echo") == "hi"
        states = {entry.name: (entry.state, entry.reason) for entry in narrow.view.discover().entries}
        assert states == {
            "gh": ("filtered", 'not in the servers of the profile "narrow"'),
            "github": ("active", ""),
        }
        async with session(fleet, alpha, "wide") as wide:
            assert await wide.tool_names() == ["gh_echo"]
            assert await wide.echo("gh_echo") == "hi"

        # A config edit reads the profile's discovery again too.
        twin = fake("twin", pids / "twin", "--tool", "env")
        path.write_text(json.dumps({"mcpServers": {"gh": twin, "github": twin}, "profiles": profiles}))
        await wait_until(lambda: _listed(narrow, "github_env"))
        assert await narrow.tool_names() == ["github_echo", "github_env"]
