"""Fixtures of the team-mode tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.integration.team.identity_provider import IdentityProvider, running_identity_provider


@pytest.fixture(scope="session")
def identity_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    """The OpenID provider, started once per test process (each xdist worker that runs a test
    asking for it has its own, on its own port) and stopped when the run ends."""
    with running_identity_provider(tmp_path_factory.mktemp("identity-provider")) as provider:
        yield provider
