"""Fixtures shared by the integration tests of more than one room."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.integration.credentials_fleet import HTTP_FLAGS, write_credentials_fleet
from tests.servers.fixtures import HttpServer, start_http_server


@pytest.fixture
def credentials_server() -> Iterator[HttpServer]:
    """The HTTP server of the credentials fleet: it answers only requests carrying its literal
    bearer token and query value."""
    server = start_http_server(*HTTP_FLAGS)
    yield server
    server.stop()


@pytest.fixture
def record_file(tmp_path: Path, credentials_server: HttpServer) -> Path:
    """The credentials fleet written for ``credentials_server``; the file where its stdio
    server records the arguments it really received."""
    record = tmp_path / "argv-received.json"
    write_credentials_fleet(credentials_server.port, record)
    return record
