"""Reading a team file (``mcpfleet serve --team FILE``, ``mcpfleet team check FILE``).

JSON or YAML (by the suffix), read with the limits of every config file (``config.readers``):
size, nesting depth, YAML aliases, duplicate keys. Then, in order:

1. ``${VAR}`` (and ``${VAR:-default}``) in any string is replaced by the variable's value in
   this replica's environment: secrets reach a team file that way only. There is no other
   form: a value starting with ``!`` is text, never a command, and a bare variable name in a
   server's ``env`` or ``headers`` is text too. Every value put in is remembered as a secret
   (masked wherever mcpfleet prints or logs text);
2. each key is checked against the contract (DESIGN.md, "Team mode"), and a key this file does
   not know is an error rather than silently ignored (``polices:`` would otherwise deny all);
3. relative paths (``identity.api_keys``, ``state.sqlite``, ``audit.file``, a server's ``cwd``)
   are resolved against the team file's folder.

Whatever is wrong comes out as one ``TeamFileError`` line naming the file, the key and the fix.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from mcpfleet.config.model import ServerConfig
from mcpfleet.config.normalise import EntryError, adapt_standard, build_server
from mcpfleet.config.readers import MAX_USER_CONFIG_BYTES, read_document
from mcpfleet.config.substitution import NOT_SECRET_VARIABLES
from mcpfleet.errors import ConfigError
from mcpfleet.redaction import remember_secret
from mcpfleet.team.model import (
    DEFAULT_DRAIN_TIMEOUT_S,
    DEFAULT_GROUPS_CLAIM,
    DEFAULT_UI_SCOPES,
    AuditSettings,
    IdentitySettings,
    Limits,
    Policy,
    StateSettings,
    TeamFile,
    UiSettings,
)
from mcpfleet.team.stores import DEFAULT_SQLITE_NAME

CREDENTIALS_MODES = ("shared", "per-user")
MAX_DRAIN_TIMEOUT_S = 3600.0
"""A drain longer than an hour is a replica nobody can replace: more is a mistake, not a need."""

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TOP_LEVEL = frozenset(
    {
        "public_url",
        "servers",
        "identity",
        "policies",
        "state",
        "limits",
        "audit",
        "metrics",
        "drain_timeout",
        "ui",
    }
)
_IDENTITY_KEYS = frozenset({"issuer", "audience", "groups_claim", "api_keys", "scopes"})
_POLICY_KEYS = frozenset({"name", "users", "groups", "allow", "deny"})
_STATE_KEYS = frozenset({"sqlite", "postgres", "redis"})
_AUDIT_KEYS = frozenset({"store", "file", "arguments", "on_failure", "sync"})
_LIMITS_KEYS = frozenset({"per_user", "per_tool"})
_UI_KEYS = frozenset({"admins", "client_id", "client_secret", "scopes"})
_ADMINS_KEYS = frozenset({"users", "groups"})
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


class TeamFileError(ConfigError):
    """A team file cannot be used: one line naming the file, the key and the fix."""

    def __init__(self, path: Path, key: str | None, problem: str) -> None:
        where = f"{path}: {key}" if key else str(path)
        # One line, whatever the parser said (a YAML error spans several).
        super().__init__(" ".join(f"{where}: {problem}".split()), path=str(path))
        self.key = key


def load_team_file(path: Path, environ: Mapping[str, str] | None = None) -> TeamFile:
    """The team file at ``path``, substituted, checked and resolved (see the module)."""
    path = Path(path).absolute()
    try:
        document = read_document(path, max_bytes=MAX_USER_CONFIG_BYTES)
    except ConfigError as error:
        raise TeamFileError(path, None, _without_path(str(error), path)) from error
    except OSError as error:
        raise TeamFileError(path, None, f"cannot read it ({error.strerror or error})") from error
    if document is None:
        raise TeamFileError(path, None, "no such file; give the path of your team file (JSON or YAML)")
    reader = _Reader(path, os.environ if environ is None else environ)
    return reader.team_file(document)


def server_configs(team: TeamFile) -> dict[str, ServerConfig]:
    """The team file's ``servers`` as the fleet's configs. Every ``env`` and ``headers`` value is
    final text (``${VAR}`` was the only substitution): none is a command or a variable name."""
    configs: dict[str, ServerConfig] = {}
    for name, entry in team.servers.items():
        config = build_server(name, adapt_standard(entry), base_dir=team.path.parent)
        configs[name] = _all_literal(config)
    return configs


def _all_literal(config: ServerConfig) -> ServerConfig:
    from dataclasses import replace

    return replace(
        config, literal_env_keys=frozenset(config.env), literal_header_keys=frozenset(config.headers)
    )


def _without_path(message: str, path: Path) -> str:
    prefix = f"{path}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a URL's host name or address) is this machine only."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class _Reader:
    """One pass over one team file's document: every error names the file and the key."""

    def __init__(self, path: Path, environ: Mapping[str, str]) -> None:
        self.path = path
        self.folder = path.parent
        self.environ = environ

    def fail(self, key: str | None, problem: str) -> TeamFileError:
        return TeamFileError(self.path, key, problem)

    # -- the whole file ---------------------------------------------------------------------------------

    def team_file(self, document: Any) -> TeamFile:
        if not isinstance(document, dict):
            raise self.fail(None, "must be a mapping of public_url, servers, identity, policies…")
        document = self.substituted(document, "")
        self.known_keys(document, _TOP_LEVEL, None)
        public_url = self.url(document.get("public_url"), "public_url", required=True)
        assert public_url is not None
        servers = self.servers(document.get("servers"))
        identity = self.identity(document.get("identity"), public_url)
        policies = self.policies(document.get("policies"))
        metrics = self.choice(document.get("metrics", "private"), "metrics", ("private", "public"))
        return TeamFile(
            path=self.path,
            public_url=public_url,
            servers=servers,
            identity=identity,
            policies=policies,
            state=self.state(document.get("state")),
            audit=self.audit(document.get("audit")),
            limits=self.limits(document.get("limits")),
            metrics=metrics,
            drain_timeout_s=self.drain_timeout(document.get("drain_timeout", DEFAULT_DRAIN_TIMEOUT_S)),
            ui=self.ui(document.get("ui")),
        )

    def substituted(self, value: Any, key: str) -> Any:
        """``value`` with every ``${VAR}`` in its strings replaced (see the module)."""
        if isinstance(value, str):
            return _VARIABLE.sub(lambda match: self.variable(match, key), value)
        if isinstance(value, list):
            return [self.substituted(item, f"{key}[{index}]") for index, item in enumerate(value)]
        if isinstance(value, dict):
            return {name: self.substituted(item, _join(key, str(name))) for name, item in value.items()}
        return value

    def variable(self, match: re.Match[str], key: str) -> str:
        name, default = match.group(1), match.group(2)
        value = self.environ.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                raise self.fail(
                    key,
                    f"${{{name}}} is not set in the environment; set {name} for the gateway "
                    f"(or write ${{{name}:-default}})",
                )
            return default
        if name not in NOT_SECRET_VARIABLES:
            remember_secret(value)
        return value

    def known_keys(self, mapping: Mapping[str, Any], known: frozenset[str], key: str | None) -> None:
        for name in mapping:
            if name not in known:
                where = _join(key or "", str(name))
                raise self.fail(where, f"unknown key; the keys here are {', '.join(sorted(known))}")

    # -- sections -----------------------------------------------------------------------------------------

    def servers(self, value: Any) -> dict[str, dict[str, Any]]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail("servers", 'must be a mapping of server names to mcpServers entries ({"url": …})')
        servers: dict[str, dict[str, Any]] = {}
        for name, entry in value.items():
            key = f"servers.{name}"
            if not isinstance(entry, dict):
                raise self.fail(key, 'must be an mcpServers entry: {"url": …} or {"command": …, "args": […]}')
            credentials = self.choice(
                entry.get("credentials", "shared"), f"{key}.credentials", CREDENTIALS_MODES
            )
            try:
                config = build_server(str(name), adapt_standard(entry), base_dir=self.folder)
            except EntryError as error:
                raise self.fail(key, f"{error}") from error
            if credentials == "per-user" and config.transport == "stdio":
                raise self.fail(
                    f"{key}.credentials",
                    '"per-user" needs a remote server ("url"): a stdio server has no upstream '
                    "sign-in of its own",
                )
            servers[str(name)] = dict(entry)
        return servers

    def identity(self, value: Any, public_url: str) -> IdentitySettings:
        if not isinstance(value, dict):
            raise self.fail(
                "identity", "required: a mapping with at least issuer (your OpenID provider's URL)"
            )
        self.known_keys(value, _IDENTITY_KEYS, "identity")
        issuer = self.url(value.get("issuer"), "identity.issuer", required=True)
        assert issuer is not None
        audience = self.string(value.get("audience", public_url), "identity.audience")
        groups_claim = self.string(value.get("groups_claim", DEFAULT_GROUPS_CLAIM), "identity.groups_claim")
        return IdentitySettings(
            # As written: a token's ``iss`` must equal it exactly (a trailing slash included).
            issuer=issuer,
            audience=audience,
            groups_claim=groups_claim,
            api_keys=self.path_of(value.get("api_keys"), "identity.api_keys"),
            scopes=self.scopes(value.get("scopes", []), "identity.scopes"),
        )

    def scopes(self, value: Any, key: str) -> tuple[str, ...]:
        def check(scope: str) -> None:
            # RFC 6749 3.3: visible ASCII but space, quote and backslash.
            if not scope or any(not "!" <= char <= "~" or char in '"\\' for char in scope):
                raise self.fail(key, f"{scope!r} is not a scope: one word of visible ASCII, no quotes")

        return self.string_list(value, key, check, 'a list of scopes, e.g. ["api://CLIENT-ID/mcp.access"]')

    def policies(self, value: Any) -> tuple[Policy, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail("policies", 'must be a list, e.g. - {groups: [eng], allow: ["github/*"]}')
        return tuple(self.policy(entry, index) for index, entry in enumerate(value))

    def policy(self, value: Any, index: int) -> Policy:
        key = f"policies[{index}]"
        if not isinstance(value, dict):
            raise self.fail(key, 'must be a mapping such as {groups: [eng], allow: ["github/*"]}')
        self.known_keys(value, _POLICY_KEYS, key)
        if "allow" not in value:
            raise self.fail(
                f"{key}.allow", 'required: the globs over server/name it allows, e.g. ["github/*"]'
            )
        name = value.get("name")
        return Policy(
            index=index,
            allow=self.globs(value["allow"], f"{key}.allow"),
            deny=self.globs(value.get("deny", []), f"{key}.deny"),
            users=self.names(value.get("users"), f"{key}.users"),
            groups=self.names(value.get("groups"), f"{key}.groups"),
            name=self.string(name, f"{key}.name") if name is not None else None,
        )

    def state(self, value: Any) -> StateSettings:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.fail("state", "must be a mapping: {postgres: postgresql://…} or {sqlite: FILE}")
        self.known_keys(value, _STATE_KEYS, "state")
        sqlite = self.path_of(value.get("sqlite", DEFAULT_SQLITE_NAME), "state.sqlite")
        assert sqlite is not None
        postgres = value.get("postgres")
        if postgres is not None and not (
            isinstance(postgres, str) and postgres.startswith(("postgresql://", "postgres://"))
        ):
            raise self.fail(
                "state.postgres", "must be a postgresql://USER@HOST/DB URL (its password by ${VAR})"
            )
        redis = value.get("redis")
        if redis is not None and not (isinstance(redis, str) and redis.startswith(("redis://", "rediss://"))):
            raise self.fail("state.redis", "must be a redis:// or rediss:// URL")
        return StateSettings(sqlite_path=sqlite, postgres=postgres, redis=redis)

    def limits(self, value: Any) -> Limits:
        if value is None:
            return Limits()
        if not isinstance(value, dict):
            raise self.fail("limits", 'must be a mapping such as {per_user: 600, per_tool: {"github/*": 60}}')
        self.known_keys(value, _LIMITS_KEYS, "limits")
        per_user = value.get("per_user")
        per_tool = value.get("per_tool", {})
        if not isinstance(per_tool, dict):
            raise self.fail(
                "limits.per_tool", 'must map server/name globs to calls per minute, e.g. {"github/*": 60}'
            )
        tools: list[tuple[str, int]] = []
        for glob, calls in per_tool.items():
            key = f'limits.per_tool."{glob}"'
            self.globs([glob], key)
            tools.append((glob, self.calls_per_minute(calls, key)))
        return Limits(
            per_user=None if per_user is None else self.calls_per_minute(per_user, "limits.per_user"),
            per_tool=tuple(tools),
        )

    def calls_per_minute(self, value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(key, f"must be a whole number of calls per minute, 1 or more, not {value!r}")
        return value

    def audit(self, value: Any) -> AuditSettings:
        if value is None:
            return AuditSettings()
        if not isinstance(value, dict):
            raise self.fail("audit", "must be a mapping such as {store: true, file: audit.jsonl}")
        self.known_keys(value, _AUDIT_KEYS, "audit")
        on_failure = self.choice(value.get("on_failure", "closed"), "audit.on_failure", ("closed", "open"))
        sync = self.choice(value.get("sync", "each"), "audit.sync", ("each", "background"))
        return AuditSettings(
            store=self.boolean(value.get("store", True), "audit.store"),
            file=self.path_of(value.get("file"), "audit.file"),
            arguments=self.boolean(value.get("arguments", False), "audit.arguments"),
            fail_closed=on_failure == "closed",
            sync="each" if sync == "each" else "background",
        )

    def ui(self, value: Any) -> UiSettings | None:
        """``ui:`` (absent: no dashboard), whose admins must name somebody."""
        if value is None:
            return None
        example = "{client_id: mcpfleet-ui, client_secret: ${UI_CLIENT_SECRET}, admins: {groups: [platform]}}"
        if not isinstance(value, dict):
            raise self.fail("ui", f"must be a mapping such as {example}")
        self.known_keys(value, _UI_KEYS, "ui")
        if "client_id" not in value:
            raise self.fail(
                "ui.client_id",
                "required: the client id the identity provider gave the gateway's registration "
                "(its redirect URI is <public_url's origin>/ui/callback)",
            )
        admins = value.get("admins")
        if not isinstance(admins, dict):
            raise self.fail(
                "ui.admins",
                "required: who may open /ui, e.g. {groups: [platform], users: [alice@example.com]}",
            )
        self.known_keys(admins, _ADMINS_KEYS, "ui.admins")
        users = self.names(admins.get("users"), "ui.admins.users") or ()
        groups = self.names(admins.get("groups"), "ui.admins.groups") or ()
        if not users and not groups:
            raise self.fail(
                "ui.admins", "names nobody: list the admins' groups or users, e.g. {groups: [platform]}"
            )
        secret = value.get("client_secret")
        scopes = self.scopes(value.get("scopes", list(DEFAULT_UI_SCOPES)), "ui.scopes")
        if "openid" not in scopes:
            raise self.fail(
                "ui.scopes", "must include openid (the sign-in is OpenID Connect), e.g. [openid, email]"
            )
        return UiSettings(
            scopes=scopes,
            client_id=self.string(value["client_id"], "ui.client_id"),
            admin_users=users,
            admin_groups=groups,
            client_secret=None if secret is None else self.string(secret, "ui.client_secret"),
        )

    def drain_timeout(self, value: Any) -> float:
        """Seconds, more than 0 and at most an hour (a number: ``30``, ``2.5``)."""
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not (number and 0 < value <= MAX_DRAIN_TIMEOUT_S):
            raise self.fail(
                "drain_timeout",
                f"must be a number of seconds above 0 and at most {MAX_DRAIN_TIMEOUT_S:.0f}, not "
                f"{value!r} (the default is {DEFAULT_DRAIN_TIMEOUT_S:.0f}); keep the orchestrator's "
                "grace period longer than it",
            )
        return float(value)

    # -- values -------------------------------------------------------------------------------------------

    def url(self, value: Any, key: str, *, required: bool) -> str | None:
        """An ``https://`` URL, or ``http://`` to this machine only (a token sent in clear)."""
        if value is None:
            if required:
                raise self.fail(key, "required: an https:// URL")
            return None
        if not isinstance(value, str) or not value:
            raise self.fail(key, "must be an https:// URL")
        parts = urlsplit(value)
        host = parts.hostname or ""
        if parts.scheme == "https" and host:
            return value
        if parts.scheme == "http" and host:
            if is_loopback_host(host):
                return value
            raise self.fail(
                key, f"{value!r} is plain http to another machine; use https:// (http:// on loopback only)"
            )
        raise self.fail(key, f"{value!r} is not an https:// URL")

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key, "must be a non-empty string")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, "must be true or false")
        return value

    def choice(self, value: Any, key: str, choices: tuple[str, ...]) -> Any:
        if value not in choices:
            raise self.fail(key, f"must be one of {', '.join(choices)}, not {value!r}")
        return value

    def path_of(self, value: Any, key: str) -> Path | None:
        if value is None:
            return None
        text = self.string(value, key)
        resolved = Path(os.path.expanduser(text))
        return resolved if resolved.is_absolute() else self.folder / resolved

    def names(self, value: Any, key: str) -> tuple[str, ...] | None:
        if value is None:
            return None
        return self.string_list(value, key, lambda item: None, "a list of names, e.g. [alice@example.com]")

    def globs(self, value: Any, key: str) -> tuple[str, ...]:
        def check(glob: str) -> None:
            if glob != "*" and "/" not in glob:
                raise self.fail(
                    key, f"{glob!r} names no server: write server/name globs, e.g. {glob}/* or */{glob}"
                )

        return self.string_list(value, key, check, 'a list of globs over server/name, e.g. ["github/*"]')

    def string_list(self, value: Any, key: str, check: Callable[[str], None], shape: str) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise self.fail(key, f"must be {shape}")
        for item in value:
            check(item)
        return tuple(value)


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name
