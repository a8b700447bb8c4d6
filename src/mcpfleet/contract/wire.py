"""What goes over the daemon's socket: one hello each way, then messages, one JSON per line.

A connection opens with the client's hello, a JSON object on one line::

    {"mcpfleet": 1, "version": "0.1.0", "kind": "session" | "control",
     "fleet": {...FleetSpec...}, "env": {...}, "host": "claude", "pid": 4242}

and the daemon's answer, one line: ``{"ok": true, "pid", "version", "session"}``, or
``{"ok": false, "code", "message"}`` before it closes the connection (``REFUSAL_CODES``).

After that, a ``session`` connection carries the host's MCP messages unchanged, JSON-RPC one
per line in both directions, exactly as on the host's stdio: the shim only copies lines. A
``control`` connection carries requests ``{"id": 1, "op": "tools", ...}`` answered by
``{"id": 1, "result": {...}}`` or ``{"id": 1, "error": {"message", "exit"}}`` (``exit`` is
the exit code a command should end with), in any order, and events the daemon pushes
``{"event": "tools_changed"}`` (``CONTROL_OPS`` lists the requests). A request still running
when its connection closes is cancelled; ``cancel`` cancels one and keeps the connection.

``env`` carries the variables that decide which config files a fleet reads
(``CONFIG_ENVIRONMENT``) and a fixed base (``BASE_ENVIRONMENT``: ``PATH``, ``HOME``, ``USER``,
``LANG``, ``LC_*``, ``TERM``, ``TZ``), never the client's whole environment. A session whose
config folders differ from the daemon's (compared after defaults and real paths,
``config_folders``) would see other servers, so the daemon refuses it
(``environment-mismatch``) and the shim serves in-process.

Before its answer the daemon may ask for more (``needs``): ``{"need": ["GITHUB_TOKEN", ...]}``
names the variables the connection's configs reference that the hello did not carry; the
client answers ``{"env": {...}}`` with the values of those it has (``env_values``), and only
then gets the answer. A server's entry is resolved with these values, the session's own:
never the daemon's environment, nor another session's.

Standard library only: the shim imports this.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mcpfleet.contract import defaults
from mcpfleet.errors import DaemonError

PROTOCOL = 2
"""Bumped whenever a hello, an answer or a control message changes shape."""
MAX_HELLO_BYTES = 1024 * 1024
"""The longest hello line either side reads."""
MAX_CONTROL_LINE_BYTES = 64 * 1024 * 1024
"""The longest control request or answer (a tool call's arguments or result)."""

ConnectionKind = Literal["session", "control"]
CONNECTION_KINDS: tuple[ConnectionKind, ...] = ("session", "control")

CONFIG_ENVIRONMENT: tuple[str, ...] = (
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "MCPFLEET_HOME",
    "CODEX_HOME",
    "CLAUDE_CONFIG_DIR",
)
"""Variables that decide which config, approval and cache files a fleet uses."""

BASE_ENVIRONMENT: tuple[str, ...] = ("PATH", "HOME", "USER", "LANG", "TERM", "TZ")
"""What every client sends and the daemon itself keeps, besides ``LC_*`` (``BASE_PREFIXES``):
the values a server needs to run at all, none of them a secret."""
BASE_PREFIXES: tuple[str, ...] = ("LC_",)

_DEFAULT_FOLDERS: dict[str, tuple[str, ...]] = {
    "XDG_CONFIG_HOME": (".config",),
    "XDG_STATE_HOME": (".local", "state"),
    "XDG_CACHE_HOME": (".cache",),
    "XDG_DATA_HOME": (".local", "share"),
    "CODEX_HOME": (".codex",),
}
"""The folder each variable means when it is unset, under ``HOME``; ``MCPFLEET_HOME`` and
``CLAUDE_CONFIG_DIR`` mean nothing when unset (their tools then use other variables)."""

REFUSAL_CODES = {
    "version-mismatch": "the daemon runs another mcpfleet version; it drains and exits, start a new one",
    "environment-mismatch": "the session reads other config files than the daemon does",
    "bad-hello": "the first line was not a hello this daemon understands",
    "draining": "the daemon is stopping; start a new one",
    "refused": "the daemon cannot serve this session (the message says why)",
}

RESTART_CODES = frozenset({"version-mismatch", "draining"})
"""Refusals of a daemon on its way out: a client starts a new one in its place, once."""

CONTROL_OPS: dict[str, str] = {
    "ping": "-> {pid, version, since}",
    "status": "-> the `daemon status --json` document",
    "stop": "-> {} then the daemon closes every server and exits",
    "fleet_status": "{fleet} -> the `status --json` document of that fleet",
    "tools": "{fleet, server?} -> the `tools --json` document of that fleet",
    "call": "{fleet, tool, arguments} -> the `call --json` document",
    "watch": '{fleet} -> {} then {"event": "tools_changed"} whenever that fleet\'s tools change',
    "cancel": "{request} -> {} and request `request` of this connection (a call) is cancelled",
    "ui": "-> {url}: a one-time login link of the daemon's dashboard (started by the first `ui`)",
}


EXA_ENTRY_FILTER = "exa"
"""Leave out an Exa server that offers only the native tool (``config.exa``): what an agent's
discovery, and so a CLI command's, does."""
ENTRY_FILTERS = frozenset({EXA_ENTRY_FILTER})
"""The discovery filters a client may name in its ``FleetSpec``: it decides which apply, the
daemon applies them (``config.entry_filters``), as data, not code."""


class WireError(DaemonError, ValueError):
    """A line that is not what the other side must send at that point."""


@dataclass(frozen=True)
class FleetSpec:
    """Which fleet a session sees and how it is served: the options of ``mcpfleet serve``
    (and the global ones) that a host's command line can carry."""

    cwd: str
    trust_project: bool = False
    enable_project_config: bool = True
    startup_timeout_ms: int = defaults.STARTUP_TIMEOUT_MS
    profile: str | None = None
    prefix: str = defaults.DEFAULT_PREFIX
    max_name_length: int = defaults.MAX_TOOL_NAME_LENGTH
    tools: str = defaults.DEFAULT_TOOL_MODE
    max_tools: int | None = None
    entry_filters: tuple[str, ...] = ()
    """What the client's own discovery leaves out (``ENTRY_FILTERS``), in order: the agent's
    Exa filter for a CLI command or an agent session; a host's session names none."""

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "cwd": self.cwd,
            "trust_project": self.trust_project,
            "enable_project_config": self.enable_project_config,
            "startup_timeout_ms": self.startup_timeout_ms,
            "profile": self.profile,
            "prefix": self.prefix,
            "max_name_length": self.max_name_length,
            "tools": self.tools,
            "max_tools": self.max_tools,
        }
        if self.entry_filters:  # a host session's hello stays what it was: it names none
            document["entry_filters"] = list(self.entry_filters)
        return document

    @classmethod
    def from_json(cls, raw: Any) -> FleetSpec:
        if not isinstance(raw, Mapping) or not isinstance(raw.get("cwd"), str):
            raise WireError('"fleet" must be an object with a "cwd" string')
        cwd: str = raw["cwd"]
        # The daemon runs in a folder of its own: a relative path would name a folder there.
        if not os.path.isabs(cwd) or "\0" in cwd:
            raise WireError(f'"fleet.cwd" must be an absolute path, got {cwd!r}')
        values: dict[str, Any] = {"cwd": cwd}
        for name, expected in _FLEET_FIELD_TYPES.items():
            value = raw.get(name)
            if value is None:
                continue
            if isinstance(value, bool) != (expected is bool) or not isinstance(value, expected):
                raise WireError(f'"fleet.{name}" must be {expected.__name__}, got {type(value).__name__}')
            values[name] = value
        filters = raw.get("entry_filters")
        if filters is not None:
            values["entry_filters"] = _entry_filters(filters)
        return cls(**values)


def _entry_filters(raw: Any) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(name, str) for name in raw):
        raise WireError(f'"fleet.entry_filters" must be a list of strings, got {type(raw).__name__}')
    unknown = [name for name in raw if name not in ENTRY_FILTERS]
    if unknown:
        known = ", ".join(sorted(ENTRY_FILTERS))
        raise WireError(f'"fleet.entry_filters" names no known filter {unknown[0]!r} (known: {known})')
    return tuple(raw)


_FLEET_FIELD_TYPES: dict[str, type] = {
    "trust_project": bool,
    "enable_project_config": bool,
    "startup_timeout_ms": int,
    "profile": str,
    "prefix": str,
    "max_name_length": int,
    "tools": str,
    "max_tools": int,
}


@dataclass(frozen=True)
class Hello:
    """The first line of a connection, from the client."""

    kind: ConnectionKind
    version: str
    fleet: FleetSpec | None
    env: Mapping[str, str] = field(default_factory=dict)
    host: str | None = None
    pid: int | None = None
    protocol: int = PROTOCOL

    def encode(self) -> bytes:
        document: dict[str, Any] = {
            "mcpfleet": self.protocol,
            "version": self.version,
            "kind": self.kind,
            "env": dict(self.env),
            "host": self.host,
            "pid": self.pid,
        }
        if self.fleet is not None:
            document["fleet"] = self.fleet.to_json()
        return encode_line(document)


def config_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``CONFIG_ENVIRONMENT`` variables of ``environ`` (this process's by default)."""
    source = os.environ if environ is None else environ
    return {name: source[name] for name in CONFIG_ENVIRONMENT if name in source}


def is_base_variable(name: str) -> bool:
    return name in BASE_ENVIRONMENT or name.startswith(BASE_PREFIXES)


def hello_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a hello carries of ``environ`` (this process's by default): the config folders'
    variables and the fixed base, nothing else."""
    source = os.environ if environ is None else environ
    return {
        name: value for name, value in source.items() if name in CONFIG_ENVIRONMENT or is_base_variable(name)
    }


def config_folders(environ: Mapping[str, str]) -> dict[str, str | None]:
    """The folder each ``CONFIG_ENVIRONMENT`` variable of ``environ`` names, as the tools
    that read it take it: an unset or relative XDG folder is its default under ``HOME``, a
    missing ``HOME`` the user's home of the password database, every folder its real path.
    Two environments read the same config files when these are equal."""
    home = environ.get("HOME") or _password_home()
    folders: dict[str, str | None] = {"HOME": _real(home)}
    for name in CONFIG_ENVIRONMENT:
        if name == "HOME":
            continue
        value = environ.get(name) or None
        if value is not None and not os.path.isabs(value) and name.startswith("XDG_"):
            value = None  # the XDG specification: a relative path is ignored
        default = _DEFAULT_FOLDERS.get(name)
        if value is None and default is not None:
            value = os.path.join(home, *default)
        folders[name] = None if value is None else _real(value)
    return folders


def _real(path: str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def _password_home() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return "/"


def needs(names: Iterable[str]) -> bytes:
    """The daemon's request for the values of ``names`` before it answers the hello."""
    return encode_line({"need": sorted(set(names))})


def needed_names(document: Mapping[str, Any]) -> list[str] | None:
    """The names a ``needs`` line asks for; None when ``document`` is the answer itself."""
    names = document.get("need")
    if names is None or "ok" in document:
        return None
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise WireError('"need" must be a list of variable names')
    return names


def env_values(names: Iterable[str], environ: Mapping[str, str] | None = None) -> bytes:
    """The client's answer to ``needs``: the values it has of ``names`` (the others are unset
    for it, and so for its servers)."""
    source = os.environ if environ is None else environ
    return encode_line({"env": {name: source[name] for name in names if name in source}})


def parse_env_values(line: bytes, asked: Iterable[str]) -> dict[str, str]:
    """The values of a client's ``env_values`` line, only of the names ``asked`` for."""
    document = decode_line(line, limit=MAX_HELLO_BYTES)
    values = document.get("env")
    if not isinstance(values, Mapping) or not all(
        isinstance(name, str) and isinstance(value, str) for name, value in values.items()
    ):
        raise WireError('the answer to "need" must be {"env": an object of strings}')
    wanted = set(asked)
    return {name: value for name, value in values.items() if name in wanted}


def parse_hello(line: bytes | Mapping[str, Any]) -> Hello:
    """The client's hello, from its line or the line already decoded; ``WireError`` says what
    is wrong with it."""
    document = decode_line(line, limit=MAX_HELLO_BYTES) if isinstance(line, bytes) else line
    protocol = document.get("mcpfleet")
    if not isinstance(protocol, int) or isinstance(protocol, bool):
        raise WireError('a hello needs "mcpfleet": the protocol number')
    kind = document.get("kind")
    if kind not in CONNECTION_KINDS:
        raise WireError(f'"kind" must be one of {", ".join(CONNECTION_KINDS)}')
    version = document.get("version")
    if not isinstance(version, str):
        raise WireError('"version" must be a string')
    env = document.get("env", {})
    if not isinstance(env, Mapping) or not all(
        isinstance(name, str) and isinstance(value, str) for name, value in env.items()
    ):
        raise WireError('"env" must be an object of strings')
    host, pid = document.get("host"), document.get("pid")
    fleet = FleetSpec.from_json(document["fleet"]) if document.get("fleet") is not None else None
    if kind == "session" and fleet is None:
        raise WireError('a session hello needs "fleet"')
    return Hello(
        kind=kind,
        version=version,
        fleet=fleet,
        env=dict(env),
        host=host if isinstance(host, str) else None,
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        protocol=protocol,
    )


def accepted(*, pid: int, version: str, session: str) -> bytes:
    """The daemon's answer to a hello it takes."""
    return encode_line({"ok": True, "pid": pid, "version": version, "session": session})


def refused(code: str, message: str) -> bytes:
    """The daemon's answer to a hello it does not take (``code`` from ``REFUSAL_CODES``)."""
    if code not in REFUSAL_CODES:
        raise ValueError(f"unknown refusal code {code!r}")
    return encode_line({"ok": False, "code": code, "message": message})


def encode_line(document: Mapping[str, Any]) -> bytes:
    """One JSON line in UTF-8, valid whatever its strings hold."""
    try:
        return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
    except UnicodeEncodeError:
        # A lone surrogate has no UTF-8 (a folder name that is not UTF-8, a ``\ud800`` escape
        # read from a peer): escaped, it stays JSON, and decodes to the same string.
        return json.dumps(document, separators=(",", ":")).encode() + b"\n"


def decode_line(line: bytes, *, limit: int = MAX_CONTROL_LINE_BYTES) -> dict[str, Any]:
    """One JSON object from one line; ``WireError`` for anything else."""
    if len(line) > limit:
        raise WireError(f"line of {len(line)} bytes is over the limit of {limit}")
    try:
        document = json.loads(line)
    except (ValueError, RecursionError) as error:
        # RecursionError: a line nested deeper than the parser's stack (``[[[[...``).
        raise WireError(f"not JSON: {error}") from None
    if not isinstance(document, dict):
        raise WireError("not a JSON object")
    return document
