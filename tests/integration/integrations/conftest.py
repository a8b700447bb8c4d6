from tests.integration.integrations.fleet_fixtures import project, slow_start  # noqa: F401
