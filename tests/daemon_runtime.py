"""A private runtime folder for every daemon client test, with a path short enough for a socket.

The unit tests that reach a daemon (``unit/daemon``, ``unit/daemon_client``, ``unit/agent``)
take it as an autouse fixture from their ``conftest.py``, so none touches the user's own."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpfleet.daemon_client import paths


@pytest.fixture(autouse=True)
def runtime_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="mf-", dir="/tmp"))
    monkeypatch.setenv(paths.RUNTIME_DIR_ENV, str(folder))
    monkeypatch.delenv("MCPFLEET_NO_DAEMON", raising=False)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
