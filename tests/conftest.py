"""Fixtures every test shares: the anyio backend and a home folder of its own.

Each test runs with ``HOME`` and the XDG variables pointing into a fresh temporary
folder, so no test reads or writes a file of the real user.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).parent
SERVERS_DIR = TESTS_DIR / "servers"
PYTHON = sys.executable


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    for variable in ("MCPFLEET_HOME", "MCPFLEET_TRUST_PROJECT", "CODEX_HOME", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(variable, raising=False)
    yield home
