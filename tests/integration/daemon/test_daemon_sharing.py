"""What the shared fleet promises its sessions, checked through a real ``mcpfleet daemon run`` over
its real socket: where each server runs (its process's working folder), and that a session which
did not trust its project never sees the servers another session trusted there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.integration.daemon.conftest import StartDaemon
from tests.integration.daemon.daemon_harness import (
    control,
    fake,
    fleet_spec,
    project_config,
    server_processes,
    session,
    user_config,
)


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
