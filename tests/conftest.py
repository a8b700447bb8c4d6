"""Fixtures every test shares: the anyio backend and a home folder of its own.

Each test runs with ``HOME`` and the XDG variables pointing into a fresh temporary
folder, so no test reads or writes a file of the real user.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from mcpfleet.team.model import StateSettings
    from tests.postgres import PostgresServer
    from tests.redis import RedisServer

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


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C means Ctrl-C in every process the suite starts, however the suite was started.

    A shell starts a background job (``make test &``, ``nohup``) with SIGINT ignored, Python
    keeps ignoring it, and an ignored signal stays ignored across ``exec``: every CLI and host
    the interrupt tests start would then shrug off their Ctrl-C, and those tests fail for a
    reason that is not mcpfleet's. Python's own handler is reset to the default in a child.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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
        "MCPFLEET_GATEWAY_TOKEN",
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


def _run_folder(basetemp: Path) -> Path:
    """The temporary folder every process of this test run shares: under pytest-xdist each
    worker's own folder lies inside the controller's."""
    return basetemp.parent if os.environ.get("PYTEST_XDIST_WORKER") else basetemp


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> PostgresServer:
    """The test run's one PostgreSQL server (tests/postgres.py), started by the first test that
    needs it, whichever worker runs it, and stopped when the run ends (``pytest_sessionfinish``)."""
    from tests.postgres import PostgresUnavailable, shared_server

    try:
        return shared_server(_run_folder(tmp_path_factory.getbasetemp()))
    except PostgresUnavailable as error:
        pytest.fail(str(error))


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database of this test's own on the run's server, dropped afterwards."""
    import psycopg
    from psycopg import sql

    from tests.postgres import database_name

    name = database_name(request.node.name)
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield postgres_server.dsn(name)
    with psycopg.connect(postgres_server.dsn(), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(params=["sqlite", "postgres"])
def state_settings(request: pytest.FixtureRequest, tmp_path: Path) -> StateSettings:
    """A fresh team state of each kind in turn: an SQLite file in the test's folder, then a
    PostgreSQL database of the test's own (tests/integration/team/)."""
    from tests.integration.team.state_helpers import settings_for

    return settings_for(request.param, tmp_path, request)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> RedisServer:
    """The test run's one redis-server (tests/redis.py), started by the first test that needs
    it, whichever worker runs it, and stopped when the run ends (``pytest_sessionfinish``). Tests
    keep their keys apart with ``tests.redis.namespace``."""
    from tests.redis import RedisUnavailable, shared_server

    try:
        return shared_server(_run_folder(tmp_path_factory.getbasetemp()))
    except RedisUnavailable as error:
        pytest.fail(str(error))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The process that ran the whole session (not an xdist worker) stops the run's PostgreSQL
    and Redis servers, if a test started them: the workers are gone by now, and nothing is left
    running."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    factory = getattr(session.config, "_tmp_path_factory", None)
    if isinstance(factory, pytest.TempPathFactory):
        from tests import postgres, redis

        postgres.stop_shared_server(factory.getbasetemp())
        redis.stop_shared_server(factory.getbasetemp())


@pytest.hookimpl(wrapper=True)
def pytest_report_to_serializable() -> Generator[None, dict[str, Any] | None, dict[str, Any] | None]:
    """A report as pytest-xdist sends it from a worker, with every lone surrogate escaped.

    The fuzz tests feed lone surrogates to code that logs them, so a passing report's captured
    log (or a failing one's message) can carry them; xdist's channel accepts only strings UTF-8
    can encode and would take the worker down. Only what is shown changes, never a verdict.
    """
    data = yield
    return _utf8_encodable(data) if data is not None else None


def _utf8_encodable(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {key: _utf8_encodable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_utf8_encodable(item) for item in value)
    return value


CONFORMANCE_FILES = "tests/conformance/"


@pytest.hookimpl(optionalhook=True)  # a plain pytest, without xdist, runs the suite too
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """How ``make test`` spreads the suite over pytest-xdist's workers (``-n``).

    Each test file is one unit of work, run whole on one worker, so a module-scoped fixture (a
    shared gateway, the bench's smoke run, the conformance runs) is set up once. The conformance
    files are a single unit: they run one after the other, as without xdist, so no more than
    ``CONFORMANCE_JOBS`` suite runs are ever under way. Units go out in collection order: the
    conformance unit, the longest, starts first, and the many short unit-test files come last,
    where they fill in while the last long files finish. Any ``--dist`` but ``load`` (xdist's
    default with ``-n``) keeps xdist's own scheduler.
    """
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SuiteScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(CONFORMANCE_FILES):
                return CONFORMANCE_FILES
            return super()._split_scope(nodeid)

    # LoadScopeScheduling otherwise sorts units by how many tests they hold, not by how long they take.
    config.option.loadscopereorder = False
    return SuiteScheduling(config, log)
