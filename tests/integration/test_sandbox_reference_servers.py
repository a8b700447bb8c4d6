"""The reference servers run unchanged inside the sandbox, on a project: the filesystem server
(npm, ``.tools/filesystem``) reads a file of the project, the git server (PyPI
``mcp-server-git``, a dev dependency) reports its status; ``status --json`` names the back-end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.integration.sandbox_fleet import BACKENDS, force_backend
from tests.integration.test_cli_filesystem_server import ENTRY

CLI = [sys.executable, "-m", "mcpfleet.cli.main"]
GIT_SERVER = Path(sys.executable).parent / "mcp-server-git"

pytestmark = pytest.mark.skipif(
    not ENTRY.exists()
    or shutil.which("node") is None
    or shutil.which("git") is None
    or not GIT_SERVER.exists(),
    reason="needs .tools/filesystem, node, git and mcp-server-git; run: make test",
)


def git(project: Path, *arguments: str) -> None:
    identity = ["-c", "user.name=Test", "-c", "user.email=test@example.com"]
    subprocess.run(["git", *identity, *arguments], cwd=project, check=True, capture_output=True)


def mcpfleet(project: Path, *arguments: str) -> Any:
    completed = subprocess.run(
        [*CLI, "--cwd", str(project), "--trust-project", "--json", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return json.loads(completed.stdout)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    name: str = request.param
    force_backend(monkeypatch, name)
    return name


def test_the_reference_servers_work_on_a_project_inside_the_sandbox(backend: str, tmp_path: Path) -> None:
    project = (tmp_path / "project").resolve()
    project.mkdir()
    (project / "README.md").write_text("read me inside the sandbox\n")
    git(project, "init", "-q")
    git(project, "add", "README.md")
    git(project, "commit", "-q", "-m", "first")
    (project / "draft.txt").write_text("not committed\n")
    servers = {
        # The package sits outside the project: the entry lets the sandbox read it.
        "files": {
            "command": "node",
            "args": [str(ENTRY), "."],
            "sandbox": {"readOnlyPaths": [str(ENTRY.parents[3])]},
        },
        "git": {"command": str(GIT_SERVER), "args": ["--repository", "."]},
    }
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))

    status = mcpfleet(project, "--startup-timeout", "0", "status")
    rows = {row["name"]: row for row in status["servers"]}
    assert {name: (row["status"], row["sandbox"]) for name, row in rows.items()} == {
        "files": ("connected", backend),
        "git": ("connected", backend),
    }, rows

    read = mcpfleet(project, "call", "files/read_text_file", json.dumps({"path": str(project / "README.md")}))
    assert read["is_error"] is False and "read me inside the sandbox" in read["text"]
    changes = mcpfleet(project, "call", "git/git_status", json.dumps({"repo_path": str(project)}))
    assert changes["is_error"] is False and "draft.txt" in changes["text"], changes
