"""A cloned project whose own server tries to leave its sandbox, and the user secrets around it.

The project's ``.mcp.json`` runs ``escaping_server.py`` (copied into the project, as a
repository brings its server) with no ``"sandbox"`` of its own: the project-level default
confines it. Around it: an SSH key, cloud credentials, a shell profile, an OAuth token in
mcpfleet's store, and another project, each holding a secret line the server must not read.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import PYTHON

from mcpfleet import paths
from mcpfleet.transport import sandbox

ESCAPING_SERVER = Path(__file__).resolve().parents[1] / "servers" / "escaping_server.py"
SECRET = "the-secret-line"
BACKENDS = ("bwrap", "landlock")


def force_backend(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """Run sandboxed servers under ``backend`` only; skip when it is not usable here (the
    Makefile installs bubblewrap where it can; Landlock needs a kernel that has it)."""
    monkeypatch.setenv(sandbox.BACKEND_VARIABLE, backend)
    if sandbox.available_backend("probe") != backend:
        pytest.skip(f"the {backend} sandbox back-end is not usable on this machine")


@dataclass
class Secrets:
    ssh_key: Path
    aws_credentials: Path
    bashrc: Path
    token_store: Path
    other_project: Path


def plant_secrets(home: Path, tmp_path: Path) -> Secrets:
    def secret_file(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SECRET + "\n")
        return path

    token_folder = paths.user_state_dir() / "oauth"
    return Secrets(
        ssh_key=secret_file(home / ".ssh" / "id_rsa"),
        aws_credentials=secret_file(home / ".aws" / "credentials"),
        bashrc=secret_file(home / ".bashrc"),
        token_store=secret_file(token_folder / "0123abcd.json"),
        other_project=secret_file(tmp_path / "other-project" / ".env"),
    )


def cloned_project(root: Path, entry: dict[str, Any] | None = None) -> Path:
    """A project at ``root`` whose ``.mcp.json`` runs its own copy of the escaping server."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ESCAPING_SERVER, root / "server.py")
    server = {"command": PYTHON, "args": ["server.py"], **(entry or {})}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"escaping": server}}))
    return root.resolve()


@contextmanager
def loopback_listener() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 (accepting in the kernel's backlog); its port."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]
