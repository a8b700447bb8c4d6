"""mcpfleet's own folders are 0700 and its approval and token files 0600, whatever the umask.

Each test runs the real code in a subprocess started with ``umask 000`` (the test process
keeps its own umask) and a home folder in which nothing exists yet, so every folder on
the way is created by mcpfleet.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def created_folders(home: Path, below: Path) -> list[Path]:
    """Every folder from ``home`` (excluded) down to ``below`` (included)."""
    relative = below.relative_to(home)
    return [home.joinpath(*relative.parts[: depth + 1]) for depth in range(len(relative.parts))]


def run_without_umask(
    arguments: list[str], *, home: Path, mcpfleet_home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    if mcpfleet_home is not None:
        environment["MCPFLEET_HOME"] = str(mcpfleet_home)
    completed = subprocess.run(
        arguments, capture_output=True, text=True, timeout=90, env=environment, umask=0, check=False
    )
    assert completed.returncode == 0, completed.stderr
    return completed


def test_approvals_are_private_under_umask_000(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": {"command": "proj-server"}}}))
    run_without_umask([*CLI, "--cwd", str(project), "approve", "proj"], home=home)
    approvals = home / ".local" / "state" / "mcpfleet" / "approvals.json"
    assert mode(approvals) == 0o600
    for folder in created_folders(home, approvals.parent):
        assert mode(folder) == 0o700, folder


def test_oauth_tokens_are_private_under_umask_000(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write_tokens = (
        "import anyio\n"
        "from mcp.shared.auth import OAuthToken\n"
        "from mcpfleet.auth.storage import FileTokenStorage\n"
        "storage = FileTokenStorage('https://example.test/mcp')\n"
        "anyio.run(storage.set_tokens, OAuthToken(access_token='secret', token_type='Bearer'))\n"
        "print(storage.path)\n"
    )
    token_file = Path(run_without_umask([PYTHON, "-c", write_tokens], home=home).stdout.strip())
    assert token_file.is_relative_to(home / ".local" / "state" / "mcpfleet")
    assert mode(token_file) == 0o600
    for folder in created_folders(home, token_file.parent):
        assert mode(folder) == 0o700, folder


def test_config_and_cache_folders_are_private_under_umask_000(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    server = ["--command", PYTHON, f"--arg={FAKE_SERVER}", "--arg=--tool", "--arg=echo"]
    run_without_umask([*CLI, "--cwd", str(tmp_path), "add", "box", *server], home=home)
    run_without_umask([*CLI, "--cwd", str(tmp_path), "--json", "tools"], home=home)
    config_file = home / ".config" / "mcpfleet" / "mcp.json"
    assert mode(config_file) == 0o600
    for folder in created_folders(home, config_file.parent):
        assert mode(folder) == 0o700, folder
    cache_folder = home / ".cache" / "mcpfleet"
    assert any(cache_folder.iterdir()), "the tool cache was not written"
    for folder in created_folders(home, cache_folder):
        assert mode(folder) == 0o700, folder


def test_mcpfleet_home_is_private_under_umask_000(tmp_path: Path) -> None:
    home, own_home = tmp_path / "home", tmp_path / "home" / "mcpfleet-home"
    home.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": {"command": "proj-server"}}}))
    run_without_umask([*CLI, "--cwd", str(project), "approve", "proj"], home=home, mcpfleet_home=own_home)
    approvals = own_home / "state" / "approvals.json"
    assert mode(approvals) == 0o600
    assert mode(own_home) == 0o700
    assert mode(own_home / "state") == 0o700
