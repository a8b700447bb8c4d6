"""The gateway's settings in mcpfleet's user config: profiles and hosts' tool budgets.

Beside ``mcpServers``, mcpfleet's user file (``<user config dir>/mcp.json``) may hold

```json
{
  "profiles": {
    "cursor": {"servers": ["github", "files"], "include": ["github_*issue*"],
               "exclude": ["*delete*"], "pin": ["files_read_text_file"]}
  },
  "toolBudgets": {"cursor*": 60, "my-agent": 20, "codex*": null}
}
```

A profile chooses what one host is served: ``servers`` (only these are started; absent:
every server), ``include`` (only tools matching one of these globs; absent: every tool),
``exclude`` (never these; wins over ``include``) and ``pin`` (served directly even when the
gateway serves ``find_tools``/``call_tool`` instead of the tools). A glob matches a tool's
served name (``github_create_issue``) or its ``server/tool`` pair (``github/create_issue``),
case-sensitively (``fnmatch`` rules: ``*``, ``?``, ``[abc]``).

``toolBudgets`` maps a glob over the client's name (what it sends in ``initialize``,
lower-cased) to the number of tools it handles well, or ``null`` for no limit; these come
before the gateway's own table of known hosts (``gateway.budget.KNOWN_CLIENT_BUDGETS``).

``"daemon": {"idleTimeout": 600, "daemonIdleTimeout": 1800}`` (seconds; ``idle_timeout`` and
``daemon_idle_timeout`` are read too) sets the daemon's lifetimes: how long a shared server
runs with no session using it (unless its entry says otherwise), and how long the daemon
itself runs with no session at all (``DaemonSettings``).

Only the user's file is read: a project (a cloned repository) does not choose what a host is
served. Every problem is one ``ConfigError`` naming the file and the fix.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet import paths
from mcpfleet.config.normalise import MAX_SECONDS, as_seconds
from mcpfleet.config.readers import MAX_USER_CONFIG_BYTES, read_document
from mcpfleet.errors import ConfigError

if TYPE_CHECKING:
    from mcpfleet.config.model import ServerConfig

PROFILES_KEY = "profiles"
BUDGETS_KEY = "toolBudgets"
DAEMON_KEY = "daemon"
DEFAULT_IDLE_TIMEOUT_S = 600.0
"""How long the daemon keeps a server no session uses (10 minutes)."""
DEFAULT_DAEMON_IDLE_TIMEOUT_S = 1800.0
"""How long the daemon runs with no session connected (30 minutes)."""
_DAEMON_KEYS: dict[str, tuple[str, ...]] = {
    "idle_timeout_s": ("idleTimeout", "idle_timeout"),
    "daemon_idle_timeout_s": ("daemonIdleTimeout", "daemon_idle_timeout"),
}
_PROFILE_KEYS = ("servers", "include", "exclude", "pin")


@dataclass(frozen=True)
class Profile:
    """What one host is served: which servers, which of their tools, which pinned."""

    name: str
    servers: tuple[str, ...] | None = None
    """Only these servers are started and served; ``None``: every server."""
    include: tuple[str, ...] | None = None
    """Only tools matching one of these globs; ``None``: every tool."""
    exclude: tuple[str, ...] = ()
    pin: tuple[str, ...] = ()

    def serves_server(self, server: str) -> bool:
        return self.servers is None or server in self.servers

    def keeps_tool(self, server: str, tool: str, served_name: str) -> bool:
        """Whether the tool is served at all under this profile."""
        if not self.serves_server(server):
            return False
        if self.include is not None and not _matches(self.include, server, tool, served_name):
            return False
        return not _matches(self.exclude, server, tool, served_name)

    def pins_tool(self, server: str, tool: str, served_name: str) -> bool:
        """Whether the tool is served directly next to ``find_tools``/``call_tool``."""
        return _matches(self.pin, server, tool, served_name)

    def entry_filter(self) -> Callable[[ServerConfig], str | None]:
        """The discovery hook that leaves out the servers this profile does not serve, so
        they are never started."""

        def leave_out(config: ServerConfig) -> str | None:
            if self.serves_server(config.name):
                return None
            return f'not in the servers of the profile "{self.name}"'

        return leave_out


def _matches(globs: tuple[str, ...], server: str, tool: str, served_name: str) -> bool:
    pair = f"{server}/{tool}"
    return any(fnmatch.fnmatchcase(served_name, glob) or fnmatch.fnmatchcase(pair, glob) for glob in globs)


@dataclass(frozen=True)
class DaemonSettings:
    """The daemon's lifetimes (``"daemon"`` in mcpfleet's user config), in seconds."""

    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    """A shared server with no session using it for this long is stopped (a server entry's
    ``idleTimeout`` overrides it; ``keepWarm`` servers never are)."""
    daemon_idle_timeout_s: float = DEFAULT_DAEMON_IDLE_TIMEOUT_S
    """The daemon with no session or control connection for this long exits."""


@dataclass(frozen=True)
class GatewaySettings:
    """The gateway's part of mcpfleet's user config."""

    path: Path
    profiles: Mapping[str, Profile] = field(default_factory=dict)
    client_budgets: tuple[tuple[str, int | None], ...] = ()
    """``(glob over the lower-cased client name, budget)`` in the file's order."""
    daemon: DaemonSettings = field(default_factory=DaemonSettings)

    def profile(self, name: str) -> Profile:
        """The profile called ``name``; a ``ConfigError`` naming it when there is none."""
        found = self.profiles.get(name)
        if found is not None:
            return found
        known = (
            f"profiles there: {', '.join(sorted(self.profiles))}" if self.profiles else "it defines none yet"
        )
        raise ConfigError(
            f'unknown profile "{name}": define it under "{PROFILES_KEY}" in {self.path} ({known})',
            path=str(self.path),
        )


def read_gateway_settings(path: Path | None = None) -> GatewaySettings:
    """Profiles and tool budgets from mcpfleet's user config (``path`` for another file);
    empty settings when the file does not exist."""
    path = path if path is not None else paths.user_config_file()
    document = read_document(path, max_bytes=MAX_USER_CONFIG_BYTES)
    if document is None:
        return GatewaySettings(path)
    if not isinstance(document, Mapping):
        raise ConfigError(f"{path}: the file must hold a JSON object; fix or remove it", path=str(path))
    return GatewaySettings(
        path,
        profiles=_profiles(document.get(PROFILES_KEY), path),
        client_budgets=_budgets(document.get(BUDGETS_KEY), path),
        daemon=_daemon(document.get(DAEMON_KEY), path),
    )


def _profiles(raw: Any, path: Path) -> dict[str, Profile]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f'{path}: "{PROFILES_KEY}" must be an object of profiles by name, e.g. '
            '{"cursor": {"servers": ["github"]}}',
            path=str(path),
        )
    profiles: dict[str, Profile] = {}
    for name, body in raw.items():
        where = f'{path}: profile "{name}"'
        if not isinstance(body, Mapping):
            raise ConfigError(f"{where} must be an object with {', '.join(_PROFILE_KEYS)}", path=str(path))
        unknown = sorted(set(body) - set(_PROFILE_KEYS))
        if unknown:
            raise ConfigError(
                f'{where} has an unknown key "{unknown[0]}"; use {", ".join(_PROFILE_KEYS)}', path=str(path)
            )
        profiles[name] = Profile(
            name,
            servers=_strings(body, "servers", where, path),
            include=_strings(body, "include", where, path),
            exclude=_strings(body, "exclude", where, path) or (),
            pin=_strings(body, "pin", where, path) or (),
        )
    return profiles


def _strings(body: Mapping[str, Any], key: str, where: str, path: Path) -> tuple[str, ...] | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ConfigError(f'{where}: "{key}" must be a list of non-empty strings', path=str(path))
    return tuple(value)


def _budgets(raw: Any, path: Path) -> tuple[tuple[str, int | None], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f'{path}: "{BUDGETS_KEY}" must be an object of client-name globs to tool counts, '
            'e.g. {"cursor*": 60}',
            path=str(path),
        )
    budgets: list[tuple[str, int | None]] = []
    for pattern, budget in raw.items():
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise ConfigError(
                f'{path}: "{BUDGETS_KEY}" of "{pattern}" must be a whole number of tools (1 or more) '
                "or null for no limit",
                path=str(path),
            )
        budgets.append((pattern.lower(), budget))
    return tuple(budgets)


def _daemon(raw: Any, path: Path) -> DaemonSettings:
    if raw is None:
        return DaemonSettings()
    example = '{"idleTimeout": 600, "daemonIdleTimeout": 1800}'
    if not isinstance(raw, Mapping):
        raise ConfigError(f'{path}: "{DAEMON_KEY}" must be an object, e.g. {example}', path=str(path))
    known = {key for spellings in _DAEMON_KEYS.values() for key in spellings}
    unknown = sorted(str(key) for key in raw if key not in known)
    if unknown:
        raise ConfigError(
            f'{path}: "{DAEMON_KEY}" has an unknown key "{unknown[0]}"; use idleTimeout, daemonIdleTimeout',
            path=str(path),
        )
    values: dict[str, float] = {}
    for field_name, spellings in _DAEMON_KEYS.items():
        given = [key for key in spellings if key in raw]
        if len(given) > 1:
            raise ConfigError(
                f'{path}: "{DAEMON_KEY}" sets both "{given[0]}" and "{given[1]}"; keep one', path=str(path)
            )
        if not given:
            continue
        value = raw[given[0]]
        seconds = as_seconds(value)
        if seconds is None:
            raise ConfigError(
                f'{path}: "{DAEMON_KEY}.{given[0]}" must be a number of seconds from 0 to {MAX_SECONDS}, '
                f"not {value!r}",
                path=str(path),
            )
        values[field_name] = seconds
    return DaemonSettings(**values)
