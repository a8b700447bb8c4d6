"""How a real daemon process ends, and that no server outlives it: idle exit, the ``stop`` op,
SIGTERM, SIGKILL (the watchdog), draining for a client of another version; and how it starts
(one per socket, a stale socket file replaced)."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import (
    Connection,
    connect,
    control,
    fake,
    fleet_spec,
    hello,
    ping,
    raw_connect,
    server_processes,
    session,
    user_config,
    wait_until_gone,
)

from mcpfleet.daemon_client import paths
from mcpfleet.transport.watchdog import GROUP_TERM_GRACE_S

FLEET_CLOSED_BOUND_S = 0.3
"""How long after the daemon's exit its servers may take to be gone: the fleet reaped them
before the exit, so no time is needed; well under the watchdog's grace, which must not be
what ended them."""


def test_the_daemon_exits_when_idle_and_not_while_a_session_is_open(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    user_config({"alpha": fake("alpha")})
    daemon = start_daemon("--daemon-idle-timeout", "1")
    with session(fleet_spec(isolated_home)) as host:
        servers = server_processes(isolated_home, "alpha")
        assert len(servers) == 1
        time.sleep(2.5)  # over twice the idle timeout: an open session keeps the daemon
        assert daemon.process.poll() is None
        assert "alpha_echo" in host.tool_names()
    assert daemon.wait_exit() == 0
    assert not wait_until_gone(servers), "the idle daemon's server outlived it"
    assert not paths.socket_path().exists()
    assert "idle: no connection for 1 s" in paths.log_path().read_text()


def test_a_connection_whose_hello_is_on_its_way_keeps_the_daemon(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    daemon = start_daemon("--daemon-idle-timeout", "1")
    sock = raw_connect()
    try:
        time.sleep(2.5)  # over twice the idle timeout, well within the hello's 10 s
        sock.sendall(hello("control"))
        answer = Connection(sock, {}).receive()
        assert answer["ok"] is True and answer["pid"] == daemon.pid
    finally:
        sock.close()
    assert daemon.wait_exit() == 0


def test_the_stop_op_answers_then_closes_every_session_and_server(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    user_config({"alpha": fake("alpha")})
    daemon = start_daemon()
    with session(fleet_spec(isolated_home)) as host:
        servers = server_processes(isolated_home, "alpha")
        with control() as link:
            assert link.control("stop")["result"] == {}
        assert host.at_end(), "the session's socket must close when the daemon stops"
    assert daemon.wait_exit() == 0
    assert not wait_until_gone(servers)
    assert not paths.socket_path().exists()


def test_sigterm_closes_every_server(isolated_home: Path, start_daemon: StartDaemon) -> None:
    """The fleet closes its servers before the daemon exits. beta ignores both its stdin's end
    and SIGTERM: had the daemon left it to its watchdog, it would outlive the daemon by the
    watchdog's grace (``GROUP_TERM_GRACE_S``) before its SIGKILL; closed by the fleet (whose
    ladder ends in SIGKILL too), it is reaped before the daemon exits."""
    assert FLEET_CLOSED_BOUND_S < GROUP_TERM_GRACE_S
    user_config({"alpha": fake("alpha"), "beta": fake("beta", "--ignore-sigterm", "--ignore-stdin-eof")})
    daemon = start_daemon()
    with session(fleet_spec(isolated_home)) as host:
        servers = server_processes(isolated_home, "alpha") + server_processes(isolated_home, "beta")
        assert len(servers) == 2
        daemon.signal(signal.SIGTERM)
        assert host.at_end()
        assert daemon.wait_exit() == 0
    assert not wait_until_gone(servers, timeout_s=FLEET_CLOSED_BOUND_S), "left to the watchdog"


def test_a_sigkilled_daemon_leaves_no_server(isolated_home: Path, start_daemon: StartDaemon) -> None:
    user_config({"alpha": fake("alpha", "--spawn-grandchild"), "beta": fake("beta", "--ignore-sigterm")})
    daemon = start_daemon()
    with session(fleet_spec(isolated_home)) as host:
        servers = server_processes(isolated_home, "alpha") + server_processes(isolated_home, "beta")
        assert len(servers) == 2
        daemon.signal(signal.SIGKILL)
        assert host.at_end()
    daemon.process.wait(timeout=10)
    assert not wait_until_gone(servers), "the watchdog must end the servers of a daemon killed outright"


def test_a_client_of_another_version_drains_the_daemon(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    """The old daemon gives up its socket at once (so the client can start a daemon of its own
    version there), keeps serving the session it has, and exits when that ends."""
    user_config({"alpha": fake("alpha")})
    old = start_daemon()
    with session(fleet_spec(isolated_home)) as kept:
        newer = connect("session", fleet_spec(isolated_home), version="99.0.0")
        try:
            assert newer.answer["ok"] is False
            assert newer.answer["code"] == "version-mismatch"
            assert "99.0.0" in newer.answer["message"]
        finally:
            newer.close()
        assert not paths.socket_path().exists(), "the draining daemon removes its socket before it answers"
        new = start_daemon()
        assert ping() is not None and ping()["pid"] == new.pid  # type: ignore[index]
        # The old daemon still serves the session it had.
        answer = kept.call_tool("alpha_echo", {"message": "still here"})
        assert answer["result"]["structuredContent"] == {"message": "still here"}
        assert old.process.poll() is None
    assert old.wait_exit() == 0
    # The old daemon left the new one's socket alone.
    found = ping()
    assert found is not None and found["pid"] == new.pid
    assert "draining (a client of mcpfleet 99.0.0 connected)" in paths.log_path().read_text()


def test_a_drained_daemon_with_no_session_answers_then_exits(start_daemon: StartDaemon) -> None:
    daemon = start_daemon()
    newer = connect("control", version="99.0.0")
    try:
        assert newer.answer["code"] == "version-mismatch"
    finally:
        newer.close()
    assert daemon.wait_exit() == 0
    assert not paths.socket_path().exists()


def test_a_daemon_that_cannot_open_its_log_says_why_on_stderr_and_exits_1(
    isolated_home: Path, start_daemon: StartDaemon
) -> None:
    # The daemon's state folder is a file: its log cannot be opened, and nothing is served.
    paths.log_path().parent.parent.mkdir(parents=True, exist_ok=True)
    paths.log_path().parent.write_text("not a folder", encoding="utf-8")
    daemon = start_daemon(wait=False)
    assert daemon.wait_exit() == 1
    assert f"mcpfleet: daemon not started: cannot open its log {paths.log_path()}" in daemon.stderr
    assert "set MCPFLEET_HOME to a folder you can write" in daemon.stderr  # what to do
    assert "Traceback" not in daemon.stderr
    assert not paths.socket_path().exists()


def test_a_second_daemon_does_not_take_the_socket(isolated_home: Path, start_daemon: StartDaemon) -> None:
    first = start_daemon()
    second = start_daemon(wait=False)
    assert second.wait_exit() == 1
    assert "a daemon already answers on" in second.stderr
    assert "`mcpfleet daemon stop` stops it" in second.stderr  # what to do, not only what happened
    found = ping()
    assert found is not None and found["pid"] == first.pid


def test_a_stale_socket_file_is_replaced(daemon_runtime: Path, start_daemon: StartDaemon) -> None:
    """A socket file nobody listens on (a daemon that was killed) does not stop a new daemon."""
    paths.ensure_runtime_dir()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(os.fsencode(paths.socket_path()))
    stale.close()  # the file stays, nobody listens
    daemon = start_daemon()
    found = ping()
    assert found is not None and found["pid"] == daemon.pid


def test_the_socket_and_its_folder_are_private(daemon_runtime: Path, start_daemon: StartDaemon) -> None:
    os.chmod(daemon_runtime, 0o755)  # loosened by hand: the daemon closes it again
    old_umask = os.umask(0)
    try:
        start_daemon()
    finally:
        os.umask(old_umask)
    assert paths.socket_path().stat().st_mode & 0o777 == 0o600
    assert daemon_runtime.stat().st_mode & 0o777 == 0o700
    assert paths.log_path().stat().st_mode & 0o777 == 0o600
    assert sorted(entry.name for entry in daemon_runtime.iterdir()) == ["daemon.sock"]
