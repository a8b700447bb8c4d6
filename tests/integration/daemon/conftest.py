"""Fixtures of the daemon's tests: a runtime folder of their own, with the daemon allowed."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short private runtime folder (a socket path has 107 bytes at most), and the daemon on."""
    folder = Path(tempfile.mkdtemp(prefix="mf-", dir="/tmp"))
    monkeypatch.setenv("MCPFLEET_RUNTIME_DIR", str(folder))
    monkeypatch.delenv("MCPFLEET_NO_DAEMON", raising=False)
    yield folder
    if folder.is_symlink():
        folder.unlink()
    else:
        shutil.rmtree(folder, ignore_errors=True)
