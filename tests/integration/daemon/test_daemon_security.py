"""Who may speak to the daemon and what it does with a hello it cannot take: another user is
kept out by the file modes and, if those were loosened, by the peer's uid; a bad hello, another
version's, or one that reads other config files is refused with one line."""

from __future__ import annotations

import contextlib
import os
import pwd
import socket
from pathlib import Path

import pytest
from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import (
    Connection,
    connect,
    fleet_spec,
    raw_connect,
    session,
    user_config,
)
from tests.integration.other_user import as_nobody

from mcpfleet.contract import wire
from mcpfleet.daemon_client import paths


def _as_other_user(hello_line: bytes) -> dict[str, str]:
    """Connect as ``nobody`` (a forked child that drops root), send ``hello_line``, and say what
    came back before the daemon closed the connection."""
    socket_file = os.fsencode(paths.socket_path())

    def connect(outcome: dict[str, str]) -> None:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.settimeout(30)
        try:
            client.connect(socket_file)
        except PermissionError:
            outcome["connect"] = "permission denied"
            return
        answer = b""
        # The daemon may close before the hello is even written: that is its answer too.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            client.sendall(hello_line)
            while chunk := client.recv(65536):
                answer += chunk
        outcome.update(connect="ok", answer=answer.decode())

    return as_nobody(connect)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run a client as another user (nobody)")
def test_another_user_cannot_reach_the_daemon(
    isolated_home: Path, daemon_runtime: Path, start_daemon: StartDaemon
) -> None:
    from tests.integration.daemon.daemon_harness import hello

    start_daemon()
    line = hello("control")
    # The modes keep another user out of the folder.
    assert _as_other_user(line) == {"connect": "permission denied"}
    # With the folder and the socket opened to everyone by hand, the peer check still does:
    # the connection is closed before the hello is read, with no answer.
    os.chmod(daemon_runtime, 0o777)
    os.chmod(paths.socket_path(), 0o777)
    assert _as_other_user(line) == {"connect": "ok", "answer": ""}
    log = paths.log_path().read_text()
    assert f"refused a connection from uid {pwd.getpwnam('nobody').pw_uid}" in log


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"hello\n", "not JSON"),
        (b"[1, 2]\n", "not a JSON object"),
        (b"[" * 200_000 + b"\n", "not JSON: maximum recursion depth exceeded"),
        (b'{"mcpfleet": 2, "version": "%s", "kind": "shell"}\n', '"kind" must be one of session, control'),
        (b'{"mcpfleet": 2, "version": "%s", "kind": "session"}\n', 'a session hello needs "fleet"'),
        (
            b'{"mcpfleet": 2, "version": "%s", "kind": "session", "fleet": {"cwd": "project"}}\n',
            '"fleet.cwd" must be an absolute path',
        ),
        (
            b'{"mcpfleet": 2, "version": "%s", "kind": "session", "fleet": {"cwd": "/tmp/a\\u0000b"}}\n',
            '"fleet.cwd" must be an absolute path',
        ),
    ],
)
def test_a_bad_hello_gets_one_refusal_line(start_daemon: StartDaemon, line: bytes, reason: str) -> None:
    from mcpfleet import __version__

    start_daemon()
    sock = raw_connect()
    connection = Connection(sock, {})
    try:
        sock.sendall(line.replace(b"%s", __version__.encode()))
        answer = connection.receive()
        assert answer["ok"] is False and answer["code"] == "bad-hello"
        assert reason in answer["message"]
        assert connection.at_end()
    finally:
        connection.close()


def test_a_hello_over_the_limit_is_refused(start_daemon: StartDaemon) -> None:
    start_daemon()
    sock = raw_connect()
    connection = Connection(sock, {})
    try:
        sock.sendall(b"{" + b" " * wire.MAX_HELLO_BYTES)  # no newline, one byte over
        answer = connection.receive()
        assert answer["code"] == "bad-hello" and "over the limit" in answer["message"]
    finally:
        connection.close()


def test_a_client_with_other_config_folders_is_refused(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    """Its servers would be another user config's: it is told so, and served nothing."""
    user_config({})
    start_daemon()
    other = {**wire.config_environment(), "XDG_CONFIG_HOME": str(isolated_home / "elsewhere")}
    refused = connect("session", fleet_spec(isolated_home), env=other)
    try:
        assert refused.answer["ok"] is False
        assert refused.answer["code"] == "environment-mismatch"
        assert "XDG_CONFIG_HOME" in refused.answer["message"]
        assert refused.at_end()
    finally:
        refused.close()
    # The daemon goes on serving the clients it can.
    with session(fleet_spec(isolated_home)) as host:
        assert host.tool_names() == []
