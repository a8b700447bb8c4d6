"""Who shares which backend: the pure decision, from a project's discovery and the user's.

Every active entry of a project's discovery gets one ``share``:

* ``session`` when the entry says so, or when the daemon learnt that the server asks
  questions it cannot tie to one session (``PerSessionServers``): each session its own
  backend;
* ``user`` for a user-level entry (the default of that level): one backend for every
  session of the user, run as the user's own discovery resolves it (the neutral folder).
  A user-level entry that this project resolves differently (``${workspaceFolder}`` in its
  arguments, a Claude ``local`` twin) would hand one project's folder to another, so it is
  shared by the project's sessions instead;
* ``project`` for a project or local entry (the default of those levels, which can never
  say ``user``: discovery refuses it), or a user-level entry that says ``project``: one
  backend per project root (and approval).

No I/O here: the fleet feeds it discoveries and reads the routes back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mcpfleet.config.model import DiscoveryResult, ServerConfig, Share, SourceInfo
from mcpfleet.redaction import remember_secret

PER_SESSION_FILE = "daemon-per-session.json"
"""In the user state folder: the servers the daemon gives one backend per session after one
of them asked a question it could not tie to a session."""


@dataclass(frozen=True)
class Assignment:
    """One entry of a project, and who shares its backend."""

    name: str
    share: Share
    config: ServerConfig
    source: SourceInfo


def default_share(source: SourceInfo) -> Share:
    return "user" if source.level == "user" else "project"


def assign(
    project: DiscoveryResult, user: DiscoveryResult, per_session: frozenset[tuple[str, str]] = frozenset()
) -> dict[str, Assignment]:
    """The share of every active entry of ``project`` (a discovery in the project's root);
    ``user`` is the discovery the user scope runs (the neutral folder, no project files);
    ``per_session`` holds ``(name, fingerprint)`` of servers learnt to need a backend each."""
    assignments: dict[str, Assignment] = {}
    for name, config in project.configs.items():
        source = project.sources[name]
        share = config.share or default_share(source)
        if (name, config.fingerprint) in per_session:
            share = "session"
        elif share == "user" and not same_backend(config, user.configs.get(name)):
            share = "project"
        assignments[name] = Assignment(name, share, config, source)
    return assignments


def same_backend(config: ServerConfig, other: ServerConfig | None) -> bool:
    """Whether two resolved entries would run the very same server: a server's identity is
    its resolved launch spec (command, arguments, environment, folder, URL, headers, limits,
    protocol settings, and which values are final text)."""
    return (
        other is not None
        and config.fingerprint == other.fingerprint
        and config.to_dict() == other.to_dict()
        and config.literal_env_keys == other.literal_env_keys
        and config.literal_header_keys == other.literal_header_keys
    )


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def referenced_names(discovery: DiscoveryResult) -> set[str]:
    """The variables a session's values are asked for: those its entries' placeholders name
    (``${VAR}``…), and those an ``env`` or ``header`` value names whole, which the client
    looks up when it connects (``client/secrets.py``)."""
    names = set(discovery.referenced_variables)
    for config in discovery.configs.values():
        names.update(_bare_names(config.env, config.literal_env_keys))
        names.update(_bare_names(config.headers, config.literal_header_keys))
    return names


def bind_session_values(discovery: DiscoveryResult, environ: Mapping[str, str]) -> DiscoveryResult:
    """``discovery`` with the connect-time variable lookups done from a session's values
    (``environ``), not the daemon's: an ``env`` or header value that is exactly the name of
    one of its variables becomes that value, and every value but a ``!command`` becomes final
    text, so the daemon's own environment is never looked into."""
    bound: dict[str, ServerConfig] = {}
    for name, config in discovery.configs.items():
        env = _bound(config.env, config.literal_env_keys, environ)
        headers = _bound(config.headers, config.literal_header_keys, environ)
        bound[name] = replace(
            config,
            env=env,
            headers=headers,
            literal_env_keys=frozenset(key for key, value in env.items() if not _is_command(config, key)),
            literal_header_keys=frozenset(key for key in headers if not _is_header_command(config, key)),
        )
    return replace(discovery, configs=bound)


def _bare_names(values: Mapping[str, str], literal: frozenset[str]) -> set[str]:
    return {value for key, value in values.items() if key not in literal and _VARIABLE_NAME.fullmatch(value)}


def _bound(values: Mapping[str, str], literal: frozenset[str], environ: Mapping[str, str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for key, value in values.items():
        if key in literal or value.startswith("!") or not _VARIABLE_NAME.fullmatch(value):
            result[key] = value
        elif value in environ:
            if environ[value]:  # an empty result drops the key, as at connect time
                result[key] = environ[value]
                remember_secret(environ[value])
        else:
            result[key] = value
    return result


def _is_command(config: ServerConfig, key: str) -> bool:
    return key not in config.literal_env_keys and config.env.get(key, "").startswith("!")


def _is_header_command(config: ServerConfig, key: str) -> bool:
    return key not in config.literal_header_keys and config.headers.get(key, "").startswith("!")


class PerSessionServers:
    """The servers learnt to need one backend per session, kept in a small state file so a
    new daemon knows them too. Keyed by name and entry fingerprint: an edited entry is shared
    again until it shows the same need."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._known = frozenset(self._read())

    @property
    def known(self) -> frozenset[tuple[str, str]]:
        return self._known

    def add(self, name: str, fingerprint: str) -> bool:
        """Remember one; ``False`` when it was known already."""
        key = (name, fingerprint)
        if key in self._known:
            return False
        self._known = self._known | {key}
        from mcpfleet.config.writer import update_json_file

        def store(document: dict[str, Any]) -> None:
            document["servers"] = [
                {"name": known_name, "fingerprint": known_fingerprint}
                for known_name, known_fingerprint in sorted(self._known)
            ]

        update_json_file(self.path, store)
        return True

    def _read(self) -> Iterable[tuple[str, str]]:
        try:
            document = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return ()
        servers = document.get("servers") if isinstance(document, Mapping) else None
        if not isinstance(servers, list):
            return ()
        return [
            (item["name"], item["fingerprint"])
            for item in servers
            if isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("fingerprint"), str)
        ]
