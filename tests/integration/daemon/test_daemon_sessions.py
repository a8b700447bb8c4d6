"""A real ``mcpfleet daemon run`` serving host sessions over its real socket: raw JSON lines after
the hello, as a shim sends them, and several sessions at once from two projects."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import (
    GONE_TIMEOUT_S,
    Connection,
    connect,
    control,
    fake,
    fleet_spec,
    hello,
    project_config,
    raw_connect,
    server_processes,
    session,
    user_config,
    wait_until_gone,
)


def wait_for(condition: Callable[[], bool], timeout_s: float = GONE_TIMEOUT_S) -> bool:
    """Whether ``condition`` held within ``timeout_s`` (polled)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_session_is_served_mcp_over_the_socket(isolated_home: Path, start_daemon: StartDaemon) -> None:
    user_config({"alpha": fake("alpha")})
    daemon = start_daemon()
    with session(fleet_spec(isolated_home)) as host:
        assert host.answer["ok"] is True
        assert host.answer["pid"] == daemon.pid
        assert "alpha_echo" in host.tool_names()
        answer = host.call_tool("alpha_echo", {"message": "through the daemon"})
        assert answer["result"]["structuredContent"] == {"message": "through the daemon"}
        assert answer["result"]["isError"] is False


def test_messages_sent_right_behind_the_hello_are_not_lost(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    """A client may write its ``initialize`` in the same packet as its hello: the daemon reads
    the hello line only, and the session gets the rest."""
    user_config({"alpha": fake("alpha")})
    start_daemon()
    sock = raw_connect()
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "eager", "version": "1"},
        },
    }
    sock.sendall(hello("session", fleet_spec(isolated_home)) + json.dumps(initialize).encode() + b"\n")
    host = Connection(sock, {})
    try:
        host.answer = host.receive()
        assert host.answer["ok"] is True
        answer = host.receive()
        assert answer["id"] == 1
        assert answer["result"]["serverInfo"]["name"] == "mcpfleet"
    finally:
        host.close()


def test_a_line_that_is_not_json_gets_a_parse_error_and_the_session_goes_on(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    user_config({"alpha": fake("alpha")})
    start_daemon()
    with session(fleet_spec(isolated_home)) as host:
        host.sock.sendall(b"this is not json\n")
        error = host.receive()
        assert error["id"] is None and error["error"]["code"] == -32700
        assert "alpha_echo" in host.tool_names()


def test_five_sessions_from_two_projects_at_once(isolated_home: Path, start_daemon: StartDaemon) -> None:
    """Each session sees the user's server and its own project's, never the other project's;
    every call is answered by the right backend."""
    user_config({"shared": fake("shared")})
    projects = [isolated_home / "one", isolated_home / "two"]
    for project in projects:
        project.mkdir()
        project_config(project, {f"local_{project.name}": fake(f"local_{project.name}")})
    start_daemon()
    seen: dict[int, list[str]] = {}
    answers: dict[int, dict[str, object]] = {}
    failures: list[BaseException] = []

    def host(index: int) -> None:
        project = projects[index % 2]
        try:
            with session(fleet_spec(project, trust_project=True), host=f"host{index}") as connection:
                seen[index] = connection.tool_names()
                answers[index] = connection.call_tool(
                    f"local_{project.name}_echo", {"message": f"session {index}"}
                )["result"]
                # Every session is open while the processes are counted.
                barrier.wait(timeout=120)
                barrier.wait(timeout=120)
        except BaseException as error:
            failures.append(error)
            barrier.abort()

    barrier = threading.Barrier(6)
    threads = [threading.Thread(target=host, args=(index,)) for index in range(5)]
    for thread in threads:
        thread.start()
    try:
        barrier.wait(timeout=120)
        with control() as link:
            status = link.control("status")["result"]
        assert sorted(session["host"] for session in status["sessions"]) == [f"host{i}" for i in range(5)]
        # The user's server once for all five, each project's once for its sessions.
        assert len(server_processes(isolated_home, "shared")) == 1
        assert len(server_processes(isolated_home, "local_one")) == 1
        assert len(server_processes(isolated_home, "local_two")) == 1
        rows = {(row["name"], row["project"]): row for row in status["servers"]}
        shared = rows[("shared", None)]
        assert (shared["share"], shared["sessions"]) == ("user", 5)
        for project, sessions in ((projects[0], 3), (projects[1], 2)):
            local = rows[(f"local_{project.name}", str(project.resolve()))]
            assert (local["share"], local["sessions"]) == ("project", sessions)
            assert local["pid"] in server_processes(isolated_home, f"local_{project.name}")
        assert status["totals"]["processes"] == 5  # the daemon, its watchdog and three servers
    finally:
        if not barrier.broken:
            barrier.wait(timeout=120)
        for thread in threads:
            thread.join(timeout=120)
    assert not failures, failures
    for index, tools in seen.items():
        mine, theirs = ("one", "two") if index % 2 == 0 else ("two", "one")
        assert f"local_{mine}_echo" in tools and "shared_echo" in tools
        assert not any(name.startswith(f"local_{theirs}_") for name in tools)
        assert answers[index]["structuredContent"] == {"message": f"session {index}"}


def test_a_session_the_fleet_cannot_serve_is_refused_with_the_reason(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    user_config({"alpha": fake("alpha")})
    start_daemon()
    refused = connect("session", fleet_spec(isolated_home, tools="everything"))
    try:
        assert refused.answer["ok"] is False
        assert refused.answer["code"] == "refused"
        assert "--tools must be one of all, search, auto" in refused.answer["message"]
        assert refused.at_end()
    finally:
        refused.close()


def test_a_closed_session_releases_nothing_the_daemon_needs(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    """A host that vanishes mid-session (its socket reset) ends its session in the daemon: the
    session leaves ``status``, the server it had to itself stops, and the next session is served."""
    user_config({"alpha": {**fake("alpha"), "share": "session"}})
    start_daemon()
    with session(fleet_spec(isolated_home)) as host:
        assert "alpha_echo" in host.tool_names()
        [server] = server_processes(isolated_home, "alpha")
        host.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with control() as link:
        assert wait_for(lambda: link.control("status")["result"]["sessions"] == []), "the session stayed"
        assert not wait_until_gone([server]), "the closed session's own server outlived it"
        assert wait_for(lambda: link.control("status")["result"]["servers"] == []), "its row stayed"
    with session(fleet_spec(isolated_home)) as host:
        answer = host.call_tool("alpha_echo", {"message": "next"})
        assert answer["result"]["structuredContent"] == {"message": "next"}
