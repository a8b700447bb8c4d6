"""The process machinery of ``transport/process.py`` with a sandbox's launcher in between.

bwrap (or the Landlock launcher) is what mcpfleet spawns; the server runs under it. Closing
must still end the server and the descendants that left its group (found by the test tag in
their environment, whatever pid namespace they are in), a host killed by SIGKILL must still
leave none behind (the watchdog), and a server that fails to start still shows its stderr.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from tests.conftest import PYTHON, SERVERS_DIR
from tests.integration.sandbox_fleet import BACKENDS, ESCAPING_SERVER, force_backend
from tests.integration.test_detached_descendants import (
    DETACHING_SERVER,
    TAG_VARIABLE,
    detached_pids,
    kill_leftovers,
    running_host,
    tagged_processes,
    wait_until_gone,
)
from tests.servers.fixtures import completed

from mcpfleet.client import connect_to_server
from mcpfleet.config.model import Sandbox, ServerConfig
from mcpfleet.errors import ConnectError
from mcpfleet.transport import sandbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name: str = request.param
    force_backend(monkeypatch, name)
    return name


@pytest.fixture
def tag() -> Iterator[str]:
    value = uuid.uuid4().hex
    yield value
    kill_leftovers(value)


def detaching_config(tmp_path: Path, tag: str) -> ServerConfig:
    """The detaching server in a sandbox that lets it write its pid file and read its code."""
    return ServerConfig(
        name="detacher",
        transport="stdio",
        command=PYTHON,
        args=(DETACHING_SERVER, "--detached-pid-file", str(tmp_path / "detached"), "--name", "detacher"),
        env={TAG_VARIABLE: tag},
        cwd=str(tmp_path),
        sandbox=Sandbox(read_only_paths=(str(SERVERS_DIR.parent),)),
    )


@pytest.mark.anyio
async def test_close_ends_a_sandboxed_server_and_its_detached_descendants(
    backend: str, tmp_path: Path, tag: str
) -> None:
    async with connect_to_server("detacher", detaching_config(tmp_path, tag), cwd=tmp_path) as connection:
        assert len(detached_pids(tmp_path / "detached")) == 2
        # The server and its two sleepers (bwrap adds itself and its pid namespace's init; the
        # Landlock launcher becomes the server).
        assert len(tagged_processes(tag)) >= (5 if backend == "bwrap" else 3)
        assert connection.pid is not None
        await connection.close()
    survivors = await anyio.to_thread.run_sync(wait_until_gone, tag)
    assert not survivors, f"{backend}: descendants outlived the closed sandboxed server: {survivors}"


def test_a_host_killed_with_sigkill_leaves_no_sandboxed_process_behind(
    backend: str, tmp_path: Path, tag: str
) -> None:
    config = detaching_config(tmp_path, tag)
    entry = {
        "command": config.command,
        "args": list(config.args),
        "env": dict(config.env),
        "cwd": str(tmp_path),
        "read_only_paths": [str(SERVERS_DIR.parent)],
    }
    try:
        with running_host(tmp_path, entry) as host:
            assert len(detached_pids(tmp_path / "detached")) == 2
            host.kill()
            host.wait(timeout=30)
            survivors = wait_until_gone(tag)
            assert not survivors, f"{backend}: sandboxed processes outlived a SIGKILLed host: {survivors}"
    finally:
        kill_leftovers(tag)


@pytest.mark.anyio
async def test_a_sandboxed_server_that_fails_to_start_shows_its_stderr_and_exit_status(
    backend: str, tmp_path: Path
) -> None:
    config = ServerConfig(
        name="broken",
        transport="stdio",
        command=PYTHON,
        args=("-c", "import sys; sys.stderr.write('cannot start: no config\\n'); sys.exit(3)"),
        cwd=str(tmp_path),
        sandbox=Sandbox(),
    )
    with pytest.raises(ConnectError) as raised:
        async with connect_to_server("broken", config, cwd=tmp_path):
            pass
    assert "cannot start: no config" in str(raised.value)
    assert "exited with code 3" in str(raised.value)


@pytest.mark.anyio
async def test_a_missing_command_in_a_sandbox_is_the_usual_command_not_found(
    backend: str, tmp_path: Path
) -> None:
    config = ServerConfig(
        name="gone", transport="stdio", command="no-such-mcp-server", cwd=str(tmp_path), sandbox=Sandbox()
    )
    with pytest.raises(ConnectError, match="command not found: no-such-mcp-server"):
        async with connect_to_server("gone", config, cwd=tmp_path):
            pass


@pytest.mark.anyio
async def test_a_home_that_is_the_root_folder_gets_a_private_home_of_its_own(
    backend: str, tmp_path: Path
) -> None:
    """``HOME=/`` (a service account's): the root cannot be swapped for the private home, so
    the server's ``HOME`` names the private home itself."""
    config = ServerConfig(
        name="rooted",
        transport="stdio",
        command=PYTHON,
        args=(str(ESCAPING_SERVER),),
        env={"HOME": "/"},
        cwd=str(tmp_path),
        sandbox=Sandbox(read_only_paths=(str(SERVERS_DIR),)),
    )
    async with connect_to_server("rooted", config, cwd=tmp_path) as connection:
        result = completed(await connection.call_tool("attempt", {"action": "whoami"}))
        written = completed(
            await connection.call_tool("attempt", {"action": "write", "target": "~/note.txt"})
        )
    private_home = sandbox.private_folder("rooted", str(tmp_path)) / "home"
    assert json.loads(result.structured_content["detail"])["home"] == str(private_home)
    assert written.structured_content["ok"]
    assert (private_home / "note.txt").read_text() == "written from inside\n"
