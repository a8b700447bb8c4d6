"""The stores of the team state as the tests take them: SQLite, a file in the test's folder, and
PostgreSQL, a database of the test's own on the run's one server (``tests/postgres.py``, through
the ``postgres_dsn`` fixture of tests/conftest.py); ``state_settings`` gives each in turn.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.integration.team.state_helpers import STORES, settings_for

from mcpfleet.team.model import StateSettings


@pytest.fixture(params=STORES)
def state_settings(request: pytest.FixtureRequest, tmp_path: Path) -> StateSettings:
    """The settings of a fresh store of each kind."""
    return settings_for(request.param, tmp_path, request)
