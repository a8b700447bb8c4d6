"""Who is asking: the identity a team gateway established for one HTTP request.

The identity check (an ASGI layer in front of the MCP endpoint) puts a ``Principal`` in the
request's ASGI scope under ``PRINCIPAL_SCOPE_KEY``; everything after it (policy, audit,
per-user credentials) reads it from there, through ``principal_of_scope``. A request that
reaches the MCP endpoint of a team gateway always has one: no principal, no service.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PRINCIPAL_SCOPE_KEY = "mcpfleet.principal"


@dataclass(frozen=True, slots=True)
class Principal:
    """A signed-in user (from a checked access token) or a service account (from an API key)."""

    subject: str
    """The token's ``sub``; for a service account, ``service:<NAME>``. Audit records it as ``user``."""
    email: str | None = None
    """The token's ``email`` claim, when it has one."""
    groups: frozenset[str] = field(default_factory=frozenset)
    """The groups the token's ``groups_claim`` lists (none for a service account)."""
    service_account: str | None = None
    """The service account's NAME when the request carried an API key, else ``None``."""

    @property
    def policy_name(self) -> str:
        """The name ``users:`` in a policy matches: a service account's NAME, else the token's
        ``email`` when present, else its ``sub`` (the contract's order)."""
        return self.service_account or self.email or self.subject

    @property
    def credentials_key(self) -> str:
        """The key per-user upstream credentials are stored under: the stable ``sub``, never the
        email (an address can be reassigned to another person; a subject cannot)."""
        return self.subject


def principal_of_scope(scope: Mapping[str, Any]) -> Principal | None:
    """The principal the identity check put in this ASGI scope, if any."""
    found = scope.get(PRINCIPAL_SCOPE_KEY)
    return found if isinstance(found, Principal) else None
