"""The blocking control client against a scripted daemon on a real Unix socket: the hello it
sends, answers matched by id, events kept, refusals, a daemon gone mid-request, a peer of
another user, and "no daemon" found at once without starting one."""

from __future__ import annotations

import argparse
import os
import re
import socket
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.servers.control_peer import Reply, control_peer, failure, result

from mcpfleet import __version__
from mcpfleet.agent.remote_client import AsyncControlClient
from mcpfleet.contract import wire
from mcpfleet.daemon_client import paths
from mcpfleet.daemon_client.control import (
    ControlClient,
    DaemonLost,
    DaemonRefused,
    DaemonUnavailable,
    Event,
    OperationFailed,
    connect_if_running,
)


def echo(request: dict[str, Any]) -> Reply:
    return result(request, {"op": request["op"]})


def test_no_socket_means_no_daemon_and_none_is_started(runtime_dir: Path) -> None:
    started = time.monotonic()
    assert connect_if_running() is None
    assert time.monotonic() - started < 1.0
    assert list(runtime_dir.iterdir()) == []


def test_a_socket_nobody_listens_on_means_no_daemon(runtime_dir: Path) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.fspath(paths.socket_path()))
    stale.close()  # the file stays, as a killed daemon leaves it
    assert paths.socket_path().exists()
    assert connect_if_running() is None


def test_the_hello_is_a_control_hello_with_the_config_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", "/somewhere/claude")
    monkeypatch.setenv("HOST_A_API_KEY", "never-sent-unasked")
    with control_peer(paths.socket_path(), echo) as peer:
        client = connect_if_running(host="mcpfleet tools")
        assert client is not None
        with client:
            assert client.welcome.pid == os.getpid()
            assert client.welcome.version == __version__
            assert client.request("ping") == {"op": "ping"}
    (hello,) = peer.hellos
    parsed = wire.parse_hello(wire.encode_line(hello))
    assert parsed.kind == "control"
    assert parsed.fleet is None
    assert parsed.version == __version__
    assert parsed.pid == os.getpid()
    assert parsed.host == "mcpfleet tools"
    assert parsed.env == wire.hello_environment()
    assert parsed.env["CLAUDE_CONFIG_DIR"] == "/somewhere/claude"
    assert "HOST_A_API_KEY" not in parsed.env


def test_answers_are_matched_by_id_and_events_are_kept() -> None:
    def script(request: dict[str, Any]) -> Reply:
        # An answer to a request this client never sent, an event, then the real answer.
        return Reply(
            (
                {"id": request["id"] + 100, "result": {"stale": True}},
                {"event": "tools_changed"},
                {"id": request["id"], "result": {"answer": request["id"]}},
            )
        )

    with control_peer(paths.socket_path(), script) as peer, ControlClient.connect() as client:
        assert client.request("tools", {"fleet": {"cwd": "/p"}, "server": "files"}) == {"answer": 1}
        assert client.request("status") == {"answer": 2}
        assert client.events == [Event("tools_changed", {"event": "tools_changed"})] * 2
    assert peer.requests[0] == {"id": 1, "op": "tools", "fleet": {"cwd": "/p"}, "server": "files"}
    assert [request["id"] for request in peer.requests] == [1, 2]


def test_an_error_answer_carries_its_message_and_exit_code() -> None:
    def script(request: dict[str, Any]) -> Reply:
        return failure(request, "no tool named 'nope'", 1)

    with (
        control_peer(paths.socket_path(), script),
        ControlClient.connect() as client,
        pytest.raises(OperationFailed) as raised,
    ):
        client.request("call", {"tool": "nope", "arguments": {}})
    assert raised.value.message == "no tool named 'nope'"
    assert raised.value.exit_code == 1


@pytest.mark.parametrize("code", sorted(wire.REFUSAL_CODES))
def test_a_refused_hello_raises_with_its_code(code: str) -> None:
    with (
        control_peer(paths.socket_path(), echo, refusal=(code, "because")),
        pytest.raises(DaemonRefused) as raised,
    ):
        connect_if_running()
    assert raised.value.code == code
    assert "because" in str(raised.value)


def test_a_daemon_gone_mid_request_is_lost_after_the_request_was_sent() -> None:
    with (
        control_peer(paths.socket_path(), lambda request: Reply(close=True)),
        ControlClient.connect() as client,
        pytest.raises(DaemonLost) as raised,
    ):
        client.request("tools", {"fleet": {"cwd": "/p"}})
    assert raised.value.request_sent
    assert "closed the connection" in str(raised.value)


def test_a_daemon_that_closes_before_answering_the_hello_is_unavailable() -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(os.fspath(paths.socket_path()))
    listener.listen(1)

    def drop_after_the_hello() -> None:
        connection, _ = listener.accept()
        connection.recv(1024)
        connection.close()

    dropper = threading.Thread(target=drop_after_the_hello)
    dropper.start()
    try:
        with pytest.raises(DaemonUnavailable, match="before answering the hello"):
            ControlClient.connect()
    finally:
        dropper.join(timeout=5)
        listener.close()


def request_once(client_kind: str, op: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """One request on a new connection of the blocking client, or of the async one."""
    if client_kind == "blocking":
        with ControlClient.connect() as client:
            return client.request(op, params)

    async def on_the_async_client() -> dict[str, Any]:
        async with AsyncControlClient.connect() as client:
            with anyio.fail_after(10):
                return await client.request(op, params)

    return anyio.run(on_the_async_client)


CLIENT_KINDS = pytest.mark.parametrize("client_kind", ["blocking", "async"])


@CLIENT_KINDS
def test_a_line_over_the_limit_is_a_lost_connection(
    monkeypatch: pytest.MonkeyPatch, client_kind: str
) -> None:
    monkeypatch.setattr(wire, "MAX_CONTROL_LINE_BYTES", 1024)

    def script(request: dict[str, Any]) -> Reply:
        return result(request, {"text": "x" * 4096})

    with (
        control_peer(paths.socket_path(), script),
        pytest.raises(DaemonLost, match="over the limit") as raised,
    ):
        request_once(client_kind, "call", {"tool": "big"})
    assert raised.value.request_sent


@CLIENT_KINDS
def test_an_unreadable_answer_is_a_lost_connection(client_kind: str) -> None:
    def script(request: dict[str, Any]) -> Reply:
        return Reply(({"id": request["id"], "neither": {}},))

    with control_peer(paths.socket_path(), script), pytest.raises(DaemonLost, match="unreadable") as raised:
        request_once(client_kind, "status")
    assert raised.value.request_sent


def test_an_unknown_op_is_never_sent() -> None:
    with (
        control_peer(paths.socket_path(), echo) as peer,
        ControlClient.connect() as client,
        pytest.raises(ValueError, match="unknown control op"),
    ):
        client.request("format_disk")
    assert peer.requests == []


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a listener as another user")
def test_a_socket_served_by_another_user_is_not_used(tmp_path: Path) -> None:
    import pwd

    nobody = pwd.getpwnam("nobody")
    folder = Path("/tmp") / f"mf-other-{os.getpid()}"
    folder.mkdir(mode=0o777)
    os.chmod(folder, 0o777)
    target = folder / "daemon.sock"
    ready_read, ready_write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child only listens as nobody, then exits
        try:
            os.close(ready_read)
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(os.fspath(target))
            os.chmod(target, 0o777)
            listener.listen(1)
            os.write(ready_write, b"1")
            connection, _ = listener.accept()
            connection.settimeout(5)
            # A hello sent to this peer would arrive here; it must never come.
            os._exit(3 if connection.recv(1024) else 0)
        except BaseException:
            os._exit(4)
    os.close(ready_write)
    try:
        assert os.read(ready_read, 1) == b"1"
        other_user = rf"answered by process \d+ of user {nobody.pw_uid}, not by your own daemon"
        with pytest.raises(DaemonUnavailable, match=rf"{re.escape(str(target))}: {other_user}"):
            connect_if_running(target)
        _, status = os.waitpid(child, 0)
        assert os.WEXITSTATUS(status) == 0, "the client sent its hello to another user's socket"
    finally:
        os.close(ready_read)
        target.unlink(missing_ok=True)
        folder.rmdir()


def test_a_request_left_unanswered_ends_at_its_timeout_with_the_connection_lost() -> None:
    # Events come, the answer never does.
    def script(request: dict[str, Any]) -> Reply:
        return Reply(tuple({"event": "tools_changed"} for _ in range(3)))

    with control_peer(paths.socket_path(), script), ControlClient.connect() as client:
        started = time.monotonic()
        with pytest.raises(DaemonLost, match=r"did not answer 'status' within 0.5 s") as lost:
            client.request("status", timeout_s=0.5)
        assert lost.value.request_sent
        assert time.monotonic() - started < 10.0
        assert [event.name for event in client.events] == ["tools_changed"] * 3


@pytest.mark.parametrize(("action", "first_op"), [("status", "status"), ("stop", "ping")])
def test_daemon_status_and_stop_give_up_on_a_daemon_that_never_answers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], action: str, first_op: str
) -> None:
    from mcpfleet.cli import daemon_commands

    monkeypatch.setattr(daemon_commands, "CONTROL_TIMEOUT_S", 0.5)
    command = {"status": daemon_commands.status_command, "stop": daemon_commands.stop_command}[action]
    with control_peer(paths.socket_path(), lambda request: None) as peer:
        assert command(argparse.Namespace(json=False)) == 1
    assert f"did not answer {first_op!r} within 0.5 s" in capsys.readouterr().err
    assert [request["op"] for request in peer.requests] == [first_op]
