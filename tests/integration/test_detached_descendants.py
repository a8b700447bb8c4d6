"""No descendant of a server outlives it, even one that left its process group.

The server (``tests/servers/detaching_server.py``) starts a ``setsid()`` sleeper and a
double-forked one. Every process of the family carries a test tag in its environment, so
"no survivor" is checked by scanning ``/proc`` for the tag, whatever the pids. Closing the
connection, ``mcpfleet call`` and ``status`` exiting, and the host dying by SIGINT,
SIGTERM or SIGKILL must each leave none.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import anyio
import pytest
from tests.conftest import PYTHON, SERVERS_DIR

from mcpfleet.client import connect_to_server
from mcpfleet.config.model import ServerConfig
from mcpfleet.paths import user_config_file

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc (Linux)")

DETACHING_SERVER = str(SERVERS_DIR / "detaching_server.py")
TAG_VARIABLE = "MCPFLEET_TEST_FAMILY"
GONE_WITHIN_S = 15.0
CLI = [sys.executable, "-m", "mcpfleet.cli.main"]


def tagged_processes(tag: str) -> list[int]:
    """Live processes whose environment carries ``tag`` (zombies read as empty)."""
    needle = f"{TAG_VARIABLE}={tag}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                if needle in environ.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def wait_until_gone(tag: str) -> list[int]:
    """The tagged processes still alive after a generous bound (empty when all are gone)."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while (survivors := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return survivors


def kill_leftovers(tag: str) -> None:
    for pid in tagged_processes(tag):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def detaching_entry(pid_file: Path, tag: str) -> dict[str, object]:
    return {
        "command": PYTHON,
        "args": [DETACHING_SERVER, "--detached-pid-file", str(pid_file), "--name", "detacher"],
        "env": {TAG_VARIABLE: tag},
    }


def detached_pids(pid_file: Path) -> list[int]:
    return [int(pid) for pid in pid_file.read_text().split()]


@pytest.fixture
def tag() -> Iterator[str]:
    value = uuid.uuid4().hex
    yield value
    kill_leftovers(value)


@pytest.mark.anyio
async def test_close_ends_descendants_that_left_the_process_group(tmp_path: Path, tag: str) -> None:
    pid_file = tmp_path / "detached"
    entry = detaching_entry(pid_file, tag)
    config = ServerConfig(
        name="detacher",
        transport="stdio",
        command=PYTHON,
        args=tuple(entry["args"]),  # type: ignore[arg-type]
        env={TAG_VARIABLE: tag},
    )
    async with connect_to_server("detacher", config, cwd=tmp_path) as connection:
        sleepers = detached_pids(pid_file)
        assert len(sleepers) == 2
        assert all(os.getsid(pid) != os.getsid(connection.pid or 0) for pid in sleepers)
        assert set(sleepers) <= set(tagged_processes(tag))
        await connection.close()
    survivors = await anyio.to_thread.run_sync(wait_until_gone, tag)
    assert not survivors, f"descendants outlived the closed server: {survivors}"


@pytest.mark.parametrize("arguments", [["call", "mcp_detacher_echo", '{"message": "hi"}'], ["status"]])
def test_the_cli_leaves_no_descendant_behind(tmp_path: Path, tag: str, arguments: list[str]) -> None:
    pid_file = tmp_path / "detached"
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": {"detacher": detaching_entry(pid_file, tag)}}))
    completed = subprocess.run(
        [*CLI, "--cwd", str(tmp_path), *arguments], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    assert len(detached_pids(pid_file)) == 2
    survivors = wait_until_gone(tag)
    assert not survivors, f"descendants outlived `mcpfleet {arguments[0]}`: {survivors}"


HOST_SCRIPT = """
import json, sys, anyio
from mcpfleet.config.model import Sandbox, ServerConfig, SourceInfo
from mcpfleet.fleet.manager import MCPManager

async def main() -> None:
    entry = json.loads(sys.argv[1])
    read_only = entry.get("read_only_paths")
    config = ServerConfig(
        name="detacher", transport="stdio", command=entry["command"], args=tuple(entry["args"]),
        env=entry["env"], cwd=entry.get("cwd"),
        sandbox=Sandbox(read_only_paths=tuple(read_only)) if read_only is not None else None,
    )
    source = SourceInfo("mcpfleet", "mcpfleet", "/virtual", "user")
    async with MCPManager("/", cache=None, startup_timeout_ms=0) as manager:
        result = await manager.connect_servers({"detacher": config}, {"detacher": source})
        assert result.connected_servers == ["detacher"], result.errors
        print("READY", flush=True)
        await anyio.sleep(300)

anyio.run(main)
"""


@contextlib.contextmanager
def running_host(tmp_path: Path, entry: Mapping[str, object]) -> Iterator[subprocess.Popen[str]]:
    """A host process (``HOST_SCRIPT``) whose manager runs the server of ``entry`` (its command,
    args, env, and optionally cwd and the read-only paths of its sandbox), once it has said
    READY; killed on the way out if it still runs."""
    host_file = tmp_path / "host.py"
    host_file.write_text(HOST_SCRIPT)
    host = subprocess.Popen(
        [sys.executable, str(host_file), json.dumps(entry)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "READY"
        yield host
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        if host.stdout is not None:
            host.stdout.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_a_host_that_dies_leaves_no_descendant_behind(
    tmp_path: Path, tag: str, signum: signal.Signals
) -> None:
    pid_file = tmp_path / "detached"
    with running_host(tmp_path, detaching_entry(pid_file, tag)) as host:
        assert len(detached_pids(pid_file)) == 2
        host.send_signal(signum)
        host.wait(timeout=30)
        survivors = wait_until_gone(tag)
        assert not survivors, f"descendants outlived a host ended by {signum.name}: {survivors}"
