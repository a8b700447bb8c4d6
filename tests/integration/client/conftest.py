"""Fixtures of the client integration tests: the HTTP test server factory."""

from __future__ import annotations

from tests.servers.fixtures import http_server_factory

__all__ = ["http_server_factory"]
