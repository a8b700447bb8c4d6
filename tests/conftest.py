"""Fixtures every test shares: the anyio backend and a home folder of its own.

Each test runs with ``HOME`` and the XDG variables pointing into a fresh temporary
folder, so no test reads or writes a file of the real user.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

TESTS_DIR = Path(__file__).parent
SERVERS_DIR = TESTS_DIR / "servers"
PYTHON = sys.executable

# Property-based tests run in `make test`: the same examples on every run (a verdict that
# depends on the seed or on machine load is no verdict), no per-example deadline (the CI
# machine has 2 cores), and no example database written into the work tree.
settings.register_profile(
    "mcpfleet",
    derandomize=True,
    deadline=None,
    max_examples=100,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("mcpfleet")


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
    # The gateway's mark too: a suite run from a shell that a gateway started must still serve.
    for variable in (
        "MCPFLEET_HOME",
        "MCPFLEET_TRUST_PROJECT",
        "CODEX_HOME",
        "CLAUDE_CONFIG_DIR",
        "MCPFLEET_GATEWAY_PID",
        "MCPFLEET_GATEWAY_URL",
    ):
        monkeypatch.delenv(variable, raising=False)
    # `mcpfleet serve` serves in its own process, as every gateway test expects; the daemon's
    # tests (tests/integration/daemon/) take this away and use a runtime folder of their own.
    monkeypatch.setenv("MCPFLEET_NO_DAEMON", "1")
    yield home


@pytest.fixture(autouse=True)
def no_remembered_secrets() -> Iterator[None]:
    """Secrets remembered for redaction are per process: one test's must not mask another's text."""
    from mcpfleet.redaction import forget_secrets

    forget_secrets()
    yield
    forget_secrets()
