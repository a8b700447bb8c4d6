"""The normalised shape every config source is turned into.

Discovery reads a dozen dialects; everything above it (client, manager, CLI) sees only
these types. They are plain frozen dataclasses and import nothing heavy.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mcpfleet.errors import Failure

Transport = Literal["stdio", "http", "sse"]
Level = Literal["local", "project", "user"]
EntryState = Literal["active", "disabled", "shadowed", "pending-approval", "invalid", "filtered"]
Share = Literal["user", "project", "session"]
"""Who shares one backend of a server under the daemon: every session of the user, the
sessions of one project, or each session its own (``share`` in a server entry)."""
SHARES: tuple[Share, ...] = ("user", "project", "session")
Pinning = Literal["strict", "warn", "off"]
"""What a changed or added tool of a server meets (``pinning`` in a server entry): withheld
until reviewed, served with a log line, or nothing (see ``config.pins``)."""
PINNINGS: tuple[Pinning, ...] = ("strict", "warn", "off")


@dataclass(frozen=True)
class Sandbox:
    """How a stdio server is confined (``"sandbox"`` in its entry; ``transport/sandbox.py``
    builds the confinement). ``true`` is ``Sandbox()``, ``false`` is ``Sandbox(enabled=False)``."""

    enabled: bool = True
    network: bool = True
    """``False`` cuts the network (a network namespace of its own: bubblewrap only)."""
    paths: tuple[str, ...] = ()
    """Folders (or files) it may read and write besides its working folder; ``~`` expanded, a
    relative one taken from its working folder."""
    read_only_paths: tuple[str, ...] = ()
    """Folders (or files) it may read besides the system's."""

    def to_dict(self) -> dict[str, Any]:
        if not self.enabled:
            return {"enabled": False}
        return {
            "enabled": True,
            "network": self.network,
            "paths": list(self.paths),
            "read_only_paths": list(self.read_only_paths),
        }


SANDBOX_OFF = Sandbox(enabled=False)

DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_TOOL_TIMEOUT_MS = 10 * 60 * 1000
"""Bound of one tool call when neither the server's ``toolTimeout`` nor the call sets one:
a tool that never answers (or answers under another id) must not hang a session forever."""
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Largest message a stdio server may send (``maxMessageBytes``): a bigger one fails the
request it answered and is never held in memory."""
DEFAULT_MAX_TOOLS = 2000
"""Most tools taken from one server (``maxTools``; ``maxToolsPerServer`` in mcpfleet's user
config for every server): a server listing more is cut, with a warning, and its further pages
are not read. A fleet of real servers lists tens per server; 100 000 cost 768 MB."""


@dataclass(frozen=True)
class SourceInfo:
    """Where one server entry came from."""

    provider: str
    """Provider id: ``mcpfleet``, ``claude-code``, ``cursor``, ``vscode``, ``codex``, …"""
    provider_name: str
    """Display name: ``mcpfleet``, ``Claude Code``, ``Cursor``, ``VS Code``, …"""
    path: str
    """Absolute path of the config file."""
    level: Level
    location: str = ""
    """Where in the file: a JSON pointer (``/mcpServers/files``) or a TOML key."""

    def to_dict(self) -> dict[str, str]:
        return {
            "provider": self.provider,
            "provider_name": self.provider_name,
            "path": self.path,
            "level": self.level,
            "location": self.location,
        }


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server, normalised: transport fields, limits and tool filters.

    ``env`` and ``headers`` may still hold connect-time secret references (a value
    ``!command`` or the bare name of an environment variable); the client resolves them,
    except in the keys listed as literal.
    """

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    """Working folder of a stdio server. Discovery always sets it (the project for an approved
    project entry, the user's home for any other); ``None`` (a config built by hand) means
    the folder the caller connects with."""
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_ms: int | None = None
    """Handshake (and default request) bound in ms; ``None`` means 30 000; 0 disables."""
    tool_timeout_ms: int | None = None
    """Bound of one tool call in ms, re-armed by progress; ``None`` means 10 minutes; 0 disables."""
    enabled: bool = True
    include_tools: tuple[str, ...] | None = None
    """Allow-list of tool names (``None``: every tool)."""
    exclude_tools: tuple[str, ...] = ()
    """Deny-list of tool names; always wins over the allow-list."""
    oauth: Mapping[str, Any] | None = None
    """OAuth client settings (client id, scopes, callback port…), HTTP servers only."""
    max_message_bytes: int | None = None
    """Largest message the server may send, in bytes; ``None`` means 64 MiB (stdio only)."""
    fingerprint: str = ""
    """SHA-256 of the canonical *unresolved* entry: the tool-cache key and the reload diff key."""
    literal_env_keys: frozenset[str] = frozenset()
    """Keys of ``env`` whose value substitution produced: final text, never run as a
    ``!command`` or looked up as a variable name at connect time."""
    literal_header_keys: frozenset[str] = frozenset()
    """The same for ``headers``."""
    share: Share | None = None
    """Who shares one backend of it under the daemon; ``None``: by its level (a user-level
    entry ``user``, a project or local one ``project``). Like ``keep_warm`` and
    ``idle_timeout_s``, it says how the daemon runs the server, not what runs: it is left out
    of ``to_dict``, hence of the fingerprint (editing it neither restarts the server nor asks
    for a new approval)."""
    keep_warm: bool = False
    """Under the daemon, never stopped for being unused."""
    idle_timeout_s: float | None = None
    """Under the daemon, stopped after this many seconds unused; ``None``: the daemon's
    ``idleTimeout``."""
    max_tools: int | None = None
    """Most tools taken from the server (``maxTools``); ``None``: ``DEFAULT_MAX_TOOLS``. A bound
    on what is read, not part of what runs: left out of ``to_dict`` and the fingerprint (so
    mcpfleet's user-level default never changes a cache key or an approval)."""
    sandbox: Sandbox | None = None
    """How it is confined when it is a stdio server. As an entry declares it, ``None`` when it
    declares none; discovery then applies its level's default (on for a project entry, off for
    a local or user one, unless ``"sandbox"`` in mcpfleet's user config says otherwise). A
    hand-built config left at ``None`` runs unconfined. What an entry declares is part of its
    fingerprint: a repository that loosens its server's sandbox asks for a new approval."""

    pinning: Pinning | None = None
    """``None``: ``strict``. Unlike ``share``, it is part of ``to_dict`` (when set), hence of
    the fingerprint: a ``git pull`` that turns a project server's pinning off asks for a new
    approval."""

    @property
    def effective_pinning(self) -> Pinning:
        return "strict" if self.pinning is None else self.pinning

    @property
    def effective_timeout_ms(self) -> int:
        """The handshake bound in ms; 0 means unbounded."""
        return DEFAULT_TIMEOUT_MS if self.timeout_ms is None else self.timeout_ms

    @property
    def effective_tool_timeout_ms(self) -> int:
        """The bound of one tool call in ms; 0 means unbounded."""
        return DEFAULT_TOOL_TIMEOUT_MS if self.tool_timeout_ms is None else self.tool_timeout_ms

    @property
    def effective_sandbox(self) -> Sandbox:
        """The confinement it runs in: off for a remote server and for a hand-built config
        that says nothing."""
        if self.transport != "stdio" or self.sandbox is None:
            return SANDBOX_OFF
        return self.sandbox

    @property
    def effective_max_tools(self) -> int:
        return DEFAULT_MAX_TOOLS if self.max_tools is None else self.max_tools

    @property
    def effective_max_message_bytes(self) -> int:
        return DEFAULT_MAX_MESSAGE_BYTES if self.max_message_bytes is None else self.max_message_bytes

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view, used for canonical hashing and for ``--json`` output."""
        data: dict[str, Any] = {"name": self.name, "transport": self.transport}
        if self.transport == "stdio":
            data.update(command=self.command, args=list(self.args), env=dict(self.env), cwd=self.cwd)
        else:
            data.update(url=self.url, headers=dict(self.headers))
        data.update(
            timeout_ms=self.timeout_ms,
            tool_timeout_ms=self.tool_timeout_ms,
            enabled=self.enabled,
            include_tools=list(self.include_tools) if self.include_tools is not None else None,
            exclude_tools=list(self.exclude_tools),
            oauth=dict(self.oauth) if self.oauth is not None else None,
        )
        # Only when set, so that the fingerprints (approvals, cache keys) of every entry
        # written before the field existed stay what they were.
        if self.max_message_bytes is not None:
            data["max_message_bytes"] = self.max_message_bytes
        if self.sandbox is not None and self.transport == "stdio":
            data["sandbox"] = self.sandbox.to_dict()
        if self.pinning is not None:
            data["pinning"] = self.pinning
        return data

    def connection_identity(self) -> str:
        """What makes two entries the same server whatever their names (alias dedupe)."""
        data = self.to_dict()
        for key in ("name", "enabled", "timeout_ms", "tool_timeout_ms", "max_message_bytes", "pinning"):
            data.pop(key, None)
        return canonical_json(data)


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def fingerprint_of(config: ServerConfig) -> str:
    """SHA-256 of a config's canonical form (call it on the unresolved config)."""
    data = config.to_dict()
    # surrogatepass: a command line may hold a lone surrogate (an argument's undecodable byte,
    # as Python reads it); the fingerprint of any config must be computable, and stays the same
    # for every config without one.
    return hashlib.sha256(canonical_json(data).encode("utf-8", "surrogatepass")).hexdigest()


ConfigFileError = Failure
"""A file that could not be read or parsed, or an entry that could not be used: a
``Failure`` of kind ``config`` whose subject (and ``path``) is the file."""


@dataclass(frozen=True)
class DiscoveredEntry:
    """One server entry as found, with what discovery decided about it."""

    name: str
    state: EntryState
    reason: str
    source: SourceInfo
    config: ServerConfig | None
    """The normalised entry; ``None`` when it was too malformed to normalise."""
    transport: str | None = None


@dataclass
class DiscoveryResult:
    """What ``load_all_mcp_configs`` returns."""

    configs: dict[str, ServerConfig] = field(default_factory=dict)
    """Active servers by name, in precedence order."""
    sources: dict[str, SourceInfo] = field(default_factory=dict)
    """Source of every active server."""
    errors: list[Failure] = field(default_factory=list)
    entries: list[DiscoveredEntry] = field(default_factory=list)
    """Every entry found, active or not, in precedence order."""
    config_paths: list[str] = field(default_factory=list)
    """Every config file that was read (existing or not), for watching and reload; the
    approvals store too when its approvals decide which project servers are active."""
    referenced_variables: set[str] = field(default_factory=set)
    """Every environment variable the substitutions of its entries asked for, set or not."""
