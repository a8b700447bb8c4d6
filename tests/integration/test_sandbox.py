"""A project's server in its sandbox, under each back-end: what it may reach and what it may not.

Real processes: the project's own server (``tests/servers/escaping_server.py``) tries to read
the user's SSH key and cloud credentials, to write their shell profile, to read mcpfleet's
token store and another project, and (``"network": false``) to reach a loopback listener;
it reads and writes its own project meanwhile.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PYTHON
from tests.integration.sandbox_fleet import (
    BACKENDS,
    ESCAPING_SERVER,
    SECRET,
    cloned_project,
    force_backend,
    loopback_listener,
    plant_secrets,
)

from mcpfleet.errors import SandboxError
from mcpfleet.fleet.manager import MCPManager
from mcpfleet.paths import user_config_file
from mcpfleet.transport import sandbox

pytestmark = pytest.mark.anyio


async def attempt(manager: MCPManager, action: str, target: str = "") -> dict[str, Any]:
    result = await manager.call_tool("escaping", "attempt", {"action": action, "target": target})
    structured: dict[str, Any] = result.structured_content
    return structured


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name: str = request.param
    force_backend(monkeypatch, name)
    return name


async def test_a_project_server_reaches_none_of_the_users_secrets(
    backend: str, isolated_home: Path, tmp_path: Path
) -> None:
    secrets = plant_secrets(isolated_home, tmp_path)
    project = cloned_project(tmp_path / "cloned-repo")
    async with MCPManager(project, cache=None, startup_timeout_ms=0, trust_project=True) as manager:
        result = await manager.discover_and_connect()
        assert result.errors == {}
        assert manager.get_connection("escaping") is not None
        for target in (secrets.ssh_key, secrets.aws_credentials, secrets.token_store, secrets.other_project):
            outcome = await attempt(manager, "read", str(target))
            assert not outcome["ok"], f"{backend}: the server read {target}"
            assert SECRET not in outcome["detail"]
        for written in ("~/.ssh/id_rsa", "~/.aws/credentials"):
            assert not (await attempt(manager, "read", written))["ok"], f"{backend}: read {written}"
        await attempt(manager, "write", str(secrets.bashrc))
        await attempt(manager, "write", "~/.bashrc")
        # Inside its own project it works as ever.
        assert (await attempt(manager, "write", str(project / "notes.txt")))["ok"]
        assert (await attempt(manager, "read", "notes.txt"))["detail"] == "written from inside\n"
        whoami = json.loads((await attempt(manager, "whoami"))["detail"])
    assert secrets.bashrc.read_text() == SECRET + "\n", f"{backend}: the server wrote the real ~/.bashrc"
    assert (project / "notes.txt").read_text() == "written from inside\n"
    assert whoami["cwd"] == str(project)
    private = sandbox.private_folder("escaping", str(project))
    if backend == "bwrap":
        # Its home is its private one, bound where the user's home is: both writes went there.
        assert whoami["home"] == str(isolated_home) and whoami["tmp"] == "/tmp"
        assert (private / "home" / ".bashrc").read_text() == "written from inside\n" * 2
    else:
        assert whoami["home"] == str(private / "home")
        assert whoami["tmp"] == str(private / "tmp")


async def test_the_same_server_unconfined_reads_the_secrets(isolated_home: Path, tmp_path: Path) -> None:
    """The check above can fail: with ``"sandbox": false`` the very same reads succeed."""
    secrets = plant_secrets(isolated_home, tmp_path)
    project = cloned_project(tmp_path / "cloned-repo", {"sandbox": False})
    async with MCPManager(project, cache=None, startup_timeout_ms=0, trust_project=True) as manager:
        await manager.discover_and_connect()
        outcome = await attempt(manager, "read", str(secrets.ssh_key))
    assert outcome == {"ok": True, "detail": SECRET + "\n"}


@pytest.mark.parametrize("network", [True, False])
async def test_network_false_cuts_the_loopback_under_bubblewrap(
    network: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    force_backend(monkeypatch, "bwrap")
    project = cloned_project(tmp_path / "cloned-repo", {"sandbox": {"network": network}})
    with loopback_listener() as port:
        async with MCPManager(project, cache=None, startup_timeout_ms=0, trust_project=True) as manager:
            await manager.discover_and_connect()
            outcome = await attempt(manager, "connect", str(port))
    assert outcome["ok"] is network, outcome


async def test_network_false_is_refused_where_only_landlock_is(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    force_backend(monkeypatch, "landlock")
    project = cloned_project(tmp_path / "cloned-repo", {"sandbox": {"network": False}})
    async with MCPManager(project, cache=None, startup_timeout_ms=0, trust_project=True) as manager:
        result = await manager.discover_and_connect()
        assert manager.get_connection("escaping") is None
    error = result.errors["escaping"]
    assert '"network": false' in error and "apt-get install bubblewrap" in error
    assert '"network": true' in error


async def test_without_a_back_end_a_sandboxed_server_does_not_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(sandbox.BACKEND_VARIABLE, "none")
    project = cloned_project(tmp_path / "cloned-repo")
    async with MCPManager(project, cache=None, startup_timeout_ms=0, trust_project=True) as manager:
        result = await manager.discover_and_connect()
        assert manager.get_connection("escaping") is None
    error = result.errors["escaping"]
    assert "apt-get install bubblewrap" in error and '"sandbox": false' in error


async def test_without_a_back_end_sandbox_false_still_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(sandbox.BACKEND_VARIABLE, "none")
    project = cloned_project(tmp_path / "cloned-repo", {"sandbox": False})
    async with MCPManager(project, cache=None, startup_timeout_ms=0, trust_project=True) as manager:
        result = await manager.discover_and_connect()
        assert result.errors == {}
        assert (await attempt(manager, "whoami"))["ok"]


def test_an_unknown_forced_back_end_is_an_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox.BACKEND_VARIABLE, "docker")
    with pytest.raises(SandboxError, match="MCPFLEET_SANDBOX_BACKEND='docker' is not one of"):
        sandbox.available_backend("files")


async def test_a_user_server_sandboxed_by_the_user_config_starts_in_its_private_home(
    backend: str, isolated_home: Path, tmp_path: Path
) -> None:
    """A user-level server runs in the home; sandboxed (here by the level's default in
    mcpfleet's user config), the home it starts in is its own, never the user's."""
    secrets = plant_secrets(isolated_home, tmp_path)
    tools = tmp_path / "tools"
    tools.mkdir()
    shutil.copy(ESCAPING_SERVER, tools / "server.py")
    user_config_file().parent.mkdir(parents=True, exist_ok=True)
    user_config_file().write_text(
        json.dumps(
            {
                "sandbox": {"user": {"readOnlyPaths": [str(tools)]}},
                "mcpServers": {"escaping": {"command": PYTHON, "args": [str(tools / "server.py")]}},
            }
        )
    )
    async with MCPManager(tmp_path, cache=None, startup_timeout_ms=0) as manager:
        result = await manager.discover_and_connect()
        assert result.errors == {}
        whoami = json.loads((await attempt(manager, "whoami"))["detail"])
        listing = await attempt(manager, "read", str(secrets.ssh_key))
        assert (await attempt(manager, "write", "in-its-home.txt"))["ok"]
    assert not listing["ok"]
    private_home = sandbox.private_folder("escaping", str(isolated_home)) / "home"
    assert (private_home / "in-its-home.txt").read_text() == "written from inside\n"
    assert not (isolated_home / "in-its-home.txt").exists()
    assert whoami["cwd"] == (str(isolated_home) if backend == "bwrap" else str(private_home))


def own_venv(project: Path) -> Path:
    """A virtual environment in ``project`` made from this interpreter (no packages: the
    escaping server needs none)."""
    base = Path(sys.executable).resolve()
    venv = project / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(base)
    (venv / "pyvenv.cfg").write_text(f"home = {base.parent}\ninclude-system-site-packages = false\n")
    return venv


async def test_a_project_server_run_by_the_projects_own_venv_may_still_write_into_it(
    backend: str, tmp_path: Path
) -> None:
    """The interpreter's folders are made readable, but one inside the project stays writable
    (a server may install into its own ``.venv``)."""
    venv = own_venv(tmp_path / "cloned-repo")
    project = cloned_project(tmp_path / "cloned-repo", {"command": str(venv / "bin" / "python")})
    async with MCPManager(project, cache=None, startup_timeout_ms=0, trust_project=True) as manager:
        result = await manager.discover_and_connect()
        assert result.errors == {}
        written = await attempt(manager, "write", str(venv / "installed.txt"))
    assert written["ok"], written
    assert (venv / "installed.txt").read_text() == "written from inside\n"
