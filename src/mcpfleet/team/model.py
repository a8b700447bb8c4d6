"""The team file (``mcpfleet serve --team FILE``) as typed records.

The shape is the contract of DESIGN.md, "Team mode": ``public_url``, ``servers``,
``identity``, ``policies``, ``state``, ``limits``, ``audit``, ``metrics``, ``drain_timeout``, ``ui``. These
records are what the loader (``team.loading``) builds from JSON or YAML after ``${VAR}`` substitution and path
resolution (relative paths against the file's folder), and what every other team module
reads; they hold no behaviour beyond small derived values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

DEFAULT_GROUPS_CLAIM = "groups"
DEFAULT_UI_SCOPES = ("openid", "email")
DEFAULT_DRAIN_TIMEOUT_S = 30.0
"""How long calls in flight get to finish once a replica is told to stop (``drain_timeout``)."""


@dataclass(frozen=True, slots=True)
class IdentitySettings:
    """``identity:``: who may sign in, and how a token is read."""

    issuer: str
    """The OpenID issuer; its discovery document (``/.well-known/openid-configuration``) names the
    JWKS. ``http://`` is accepted on loopback only."""
    audience: str
    """The ``aud`` a token must carry (RFC 8707's resource); defaults to ``public_url``."""
    groups_claim: str = DEFAULT_GROUPS_CLAIM
    api_keys: Path | None = None
    """The file of hashed service-account keys (``mcpfleet team key add``), resolved."""
    scopes: tuple[str, ...] = ()
    """The scopes a client asks the issuer for (RFC 9728's ``scopes_supported``, and the 401's
    ``scope``): what an issuer that ignores RFC 8707's ``resource`` (Entra ID) needs to be
    asked for a token meant for this gateway."""


@dataclass(frozen=True, slots=True)
class Policy:
    """One entry of ``policies:``; the first whose ``users``/``groups`` match decides."""

    index: int
    """Its position in the list, from 0: a denial says ``denied by policy N``."""
    allow: tuple[str, ...]
    """Globs over ``server/name`` (tools, resources and prompts alike)."""
    deny: tuple[str, ...] = ()
    """Globs carved out of ``allow`` by the same policy."""
    users: tuple[str, ...] | None = None
    """``None``: any user; else names matched against ``Principal.policy_name``."""
    groups: tuple[str, ...] | None = None
    """``None``: any group; else the principal must be in one of them."""
    name: str | None = None


@dataclass(frozen=True, slots=True)
class StateSettings:
    """``state:``: where durable state lives (SQLite beside the team file unless ``postgres``)."""

    sqlite_path: Path
    """Used when ``postgres`` is ``None``: one replica only."""
    postgres: str | None = None
    redis: str | None = None
    """Shared ephemeral state, required past one replica (team mode II)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """``limits:``: how many ``tools/call`` each user may make in a minute (``team.limits``)."""

    per_user: int | None = None
    """Over every tool together; ``None``: no such limit."""
    per_tool: tuple[tuple[str, int], ...] = ()
    """``(glob over server/name, calls)``, in the file's order: the first glob that matches a
    tool decides its limit, counted per user and per tool."""

    def tool_limit(self, server: str, name: str) -> tuple[str, int] | None:
        """The ``(glob, calls)`` that limits ``server/name``, if one does."""
        from fnmatch import fnmatchcase

        target = f"{server}/{name}"
        return next(((glob, calls) for glob, calls in self.per_tool if fnmatchcase(target, glob)), None)


@dataclass(frozen=True, slots=True)
class AuditSettings:
    """``audit:``: one record per call."""

    store: bool = True
    """Record in the state store (SQLite or PostgreSQL)."""
    file: Path | None = None
    """Also append one JSON object per line here (for log shippers)."""
    arguments: bool = False
    """Record the arguments' values, not only their digest."""
    fail_closed: bool = True
    """A record that cannot be written fails the call (``on_failure: closed``, the default) rather
    than letting it through unrecorded (``open``)."""
    sync: Literal["each", "background"] = "each"
    """``each``: every record is on disk before its call answers (a disk flush per call);
    ``background``: in the store before its call answers, flushed to disk by the store within a
    second (a crash of the machine, or of PostgreSQL, may lose the last records). It sets the
    store's writes as a whole: per-user credentials follow it too."""


@dataclass(frozen=True, slots=True)
class UiSettings:
    """``ui:``: the dashboard at ``/ui``, for the admins, signed in through ``identity.issuer``.

    The gateway is a client of the identity provider for this (OpenID Connect's authorization
    code flow with PKCE): registered there under ``client_id``, with ``<origin>/ui/callback`` as
    its redirect URI; ``client_secret`` is that registration's secret (``${VAR}``), or ``None``
    for a public client."""

    client_id: str
    admin_users: tuple[str, ...] = ()
    """Matched as policies' ``users:`` are: the ``email`` claim when present, else ``sub``."""
    admin_groups: tuple[str, ...] = ()
    """Matched against the groups ``identity.groups_claim`` lists."""
    client_secret: str | None = None
    scopes: tuple[str, ...] = DEFAULT_UI_SCOPES
    """What the sign-in asks for: ``openid`` and what puts ``email`` and the groups in the ID
    token at this provider (Okta: ``groups``; Entra ID sends groups by its token configuration)."""


@dataclass(frozen=True, slots=True)
class TeamFile:
    """A loaded, validated team file."""

    path: Path
    public_url: str
    servers: dict[str, dict[str, Any]]
    """``mcpServers`` entries as written (after substitution); ``"credentials": "per-user"`` marks
    the servers that use each user's own upstream credentials."""
    identity: IdentitySettings
    policies: tuple[Policy, ...]
    state: StateSettings
    audit: AuditSettings = field(default_factory=AuditSettings)
    limits: Limits = field(default_factory=Limits)
    metrics: Literal["private", "public"] = "private"
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    """``drain_timeout``: after SIGTERM, the seconds calls in flight get to finish before they are cut."""
    ui: UiSettings | None = None
    """``None``: no ``ui:`` block, and ``/ui`` answers 404 saying how to enable it."""

    def per_user_servers(self) -> frozenset[str]:
        """The servers whose calls use the caller's own upstream credentials."""
        servers = self.servers.items()
        return frozenset(name for name, entry in servers if entry.get("credentials") == "per-user")
