"""Turning one tool's raw server entry into a validated ``ServerConfig``.

Each tool gets a small *adapter* that renames its keys into one canonical dict
(``type``, ``command``, ``args``, ``env``, ``cwd``, ``url``, ``headers``, ``enabled``,
``timeout_ms``, ``tool_timeout_ms``, ``include_tools``, ``exclude_tools``, ``oauth``,
``max_message_bytes``, ``max_tools``, ``sandbox``, ``pinning``, and the daemon's ``share``,
``keep_warm``, ``idle_timeout_s``; mcpfleet's own ``sandbox`` and ``pinning`` are read from the
entries of every source);
``build_server`` then validates that dict once, for every tool alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mcpfleet.config.model import (
    PINNINGS,
    SHARES,
    Pinning,
    Sandbox,
    ServerConfig,
    Share,
    Transport,
    fingerprint_of,
)
from mcpfleet.config.substitution import CODEX_BEARER_HEADER
from mcpfleet.errors import MCPFleetError

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
MAX_TIMEOUT_MS = 10**12
"""About 31 years: more is a typo or an attack, and 0 already means no bound."""
MAX_SECONDS = MAX_TIMEOUT_MS // 1000

TRANSPORT_ALIASES: dict[str, Transport] = {
    "stdio": "stdio",
    "local": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamableHttp": "http",
    "streamable_http": "http",
    "remote": "http",
    "sse": "sse",
}

Canonical = dict[str, Any]
Adapter = Callable[[Mapping[str, Any]], Canonical]


class EntryError(MCPFleetError, ValueError):
    """This entry cannot be used; the message says why (without the server name)."""


class SkippedEntry(MCPFleetError):
    """This entry is not an MCP server mcpfleet can run (a Goose builtin, a Zed extension…)."""


def validate_name(name: str) -> None:
    if not name:
        raise EntryError("server name cannot be empty")
    if len(name) > 100:
        raise EntryError("server name is too long (max 100 characters)")
    if not NAME_PATTERN.match(name):
        raise EntryError("server name can only contain letters, digits, '-', '_', '.' and ':'")


def _first(raw: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if raw.get(key) is not None:
            return raw[key]
    return None


def _scaled(value: Any, scale: int) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return value * scale


def _mapping(raw: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise EntryError(f'"{key}" must be an object')
    return dict(value)


def _names(raw: Mapping[str, Any], key: str) -> dict[str, str]:
    """A list of variable names, as the bare-name references the client resolves."""
    value = raw.get(key) or []
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise EntryError(f'"{key}" must be a list of variable names')
    return {name: name for name in value}


def _enabled(raw: Mapping[str, Any]) -> Any:
    if "disabled" in raw and isinstance(raw["disabled"], bool):
        return not raw["disabled"]
    return raw.get("enabled")


def adapt_standard(
    raw: Mapping[str, Any], *, timeout_scale: int = 1, bare_url: Transport = "http"
) -> Canonical:
    """The ``mcpServers`` family (Claude, Cursor, Windsurf, VS Code, Gemini, Cline, Roo, mcpfleet).

    Timeouts are in ms unless ``timeout_scale`` converts them; ``bare_url`` is the
    transport of a ``url`` without ``type`` (Cline reads it as SSE).
    """
    kind = _first(raw, "type", "transportType")
    if kind is None and raw.get("httpUrl") is not None:
        kind = "http"
    if kind is None and _first(raw, "url", "serverUrl", "httpUrl") is not None and raw.get("command") is None:
        kind = bare_url
    return {
        "type": kind,
        "command": raw.get("command"),
        "args": raw.get("args"),
        "env": raw.get("env"),
        "cwd": raw.get("cwd"),
        "url": _first(raw, "url", "serverUrl", "httpUrl"),
        "headers": raw.get("headers"),
        "enabled": _enabled(raw),
        "timeout_ms": _scaled(raw.get("timeout"), timeout_scale),
        "tool_timeout_ms": raw.get("toolTimeout"),
        "include_tools": _first(raw, "includeTools", "enabledTools"),
        "exclude_tools": _first(raw, "excludeTools", "disabledTools"),
        "oauth": raw.get("oauth"),
        "max_message_bytes": raw.get("maxMessageBytes"),
        "share": raw.get("share"),
        "keep_warm": _first(raw, "keepWarm", "keep_warm"),
        "idle_timeout_s": _first(raw, "idleTimeout", "idle_timeout"),
        "max_tools": raw.get("maxTools"),
        "sandbox": raw.get("sandbox"),
        "pinning": raw.get("pinning"),
    }


def adapt_seconds(raw: Mapping[str, Any]) -> Canonical:
    """Roo Code: the standard shape with timeouts in seconds."""
    return adapt_standard(raw, timeout_scale=1000)


def adapt_cline(raw: Mapping[str, Any]) -> Canonical:
    """Cline: timeouts in seconds, and a ``url`` without ``type`` is SSE."""
    return adapt_standard(raw, timeout_scale=1000, bare_url="sse")


def adapt_vscode(raw: Mapping[str, Any]) -> Canonical:
    """VS Code: the standard shape, but ``${input:id}`` values only VS Code can prompt for."""
    for value in _strings_in(raw):
        match = re.search(r"\$\{input:([^}]+)\}", value)
        if match:
            raise SkippedEntry(
                f"needs the VS Code input '{match.group(1)}', which only VS Code can prompt for; "
                "put the value in mcpfleet's own config instead"
            )
    return adapt_standard(raw)


def _strings_in(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _strings_in(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings_in(item)]
    return []


def adapt_zed(raw: Mapping[str, Any]) -> Canonical:
    """Zed ``context_servers``: seconds; also the 2024 nested ``command: {path, args, env}``."""
    command = raw.get("command")
    if isinstance(command, Mapping):
        raw = {**raw, "command": command.get("path"), "args": command.get("args"), "env": command.get("env")}
    elif command is None and raw.get("url") is None:
        raise SkippedEntry("provided by a Zed extension, which only Zed can run")
    return adapt_standard(raw, timeout_scale=1000)


def adapt_codex(raw: Mapping[str, Any]) -> Canonical:
    """Codex ``[mcp_servers.*]``: secrets are referenced by variable *name*.

    ``env_vars`` and ``env_http_headers`` become bare names (the client looks them up at
    connect time); ``bearer_token_env_var`` becomes a ``Bearer ${VAR}`` header that the
    ``codex`` dialect expands.
    """
    env = {**_mapping(raw, "env"), **_names(raw, "env_vars")}
    headers = {**_mapping(raw, "http_headers"), **_mapping(raw, "env_http_headers")}
    if isinstance(raw.get("bearer_token_env_var"), str):
        headers[CODEX_BEARER_HEADER] = "Bearer ${" + raw["bearer_token_env_var"] + "}"
    startup_ms = raw.get("startup_timeout_ms")
    if startup_ms is None:
        startup_ms = _scaled(raw.get("startup_timeout_sec"), 1000)
    return {
        "type": None,
        "command": raw.get("command"),
        "args": raw.get("args"),
        "env": env,
        "cwd": raw.get("cwd"),
        "url": raw.get("url"),
        "headers": headers,
        "enabled": raw.get("enabled"),
        "timeout_ms": startup_ms,
        "tool_timeout_ms": _scaled(raw.get("tool_timeout_sec"), 1000),
        "include_tools": raw.get("enabled_tools"),
        "exclude_tools": raw.get("disabled_tools"),
        "root_command": True,
        "sandbox": raw.get("sandbox"),
        "pinning": raw.get("pinning"),
    }


def adapt_opencode(raw: Mapping[str, Any]) -> Canonical:
    """OpenCode ``mcp``: ``local``/``remote``, command as an array, ``environment``."""
    command = raw.get("command")
    args = list(raw.get("args") or [])
    if isinstance(command, list):
        if not command:
            raise EntryError("'command' is an empty list")
        command, args = command[0], [*command[1:], *args]
    oauth = raw.get("oauth")
    return {
        "type": raw.get("type"),
        "command": command,
        "args": args,
        "env": _first(raw, "environment", "env"),
        "cwd": raw.get("cwd"),
        "url": raw.get("url"),
        "headers": raw.get("headers"),
        "enabled": raw.get("enabled"),
        "timeout_ms": raw.get("timeout"),
        "oauth": oauth if isinstance(oauth, Mapping) else None,
        "sandbox": raw.get("sandbox"),
        "pinning": raw.get("pinning"),
    }


_GOOSE_MCP_TYPES = frozenset({"stdio", "sse", "streamable_http"})


def adapt_goose(raw: Mapping[str, Any]) -> Canonical:
    """Goose ``extensions``: ``cmd``/``uri``/``envs``, ``env_keys`` by name, seconds."""
    kind = raw.get("type")
    if kind not in _GOOSE_MCP_TYPES:
        raise SkippedEntry(f"Goose extension of type {kind!r} is not an MCP server")
    env = {**_mapping(raw, "envs"), **_names(raw, "env_keys")}
    return {
        "type": kind,
        "command": raw.get("cmd"),
        "args": raw.get("args"),
        "env": env,
        "cwd": raw.get("cwd"),
        "url": raw.get("uri"),
        "headers": raw.get("headers"),
        "enabled": raw.get("enabled"),
        "timeout_ms": _scaled(raw.get("timeout"), 1000),
        "include_tools": raw.get("available_tools") or None,
        "sandbox": raw.get("sandbox"),
        "pinning": raw.get("pinning"),
    }


def adapt_continue(raw: Mapping[str, Any]) -> Canonical:
    """Continue YAML blocks: ``requestOptions.headers`` and ``connectionTimeout`` (ms)."""
    options = raw.get("requestOptions")
    headers = options.get("headers") if isinstance(options, Mapping) else None
    return {**adapt_standard(raw), "headers": headers, "timeout_ms": raw.get("connectionTimeout")}


# --- validation -------------------------------------------------------------------------


def build_server(name: str, fields: Canonical, *, base_dir: Path) -> ServerConfig:
    """Validate one canonical entry; raises ``EntryError`` with what is wrong.

    The returned config is unresolved (placeholders kept) and carries its fingerprint.
    """
    validate_name(name)
    command = _optional_str(fields, "command")
    url = _optional_str(fields, "url")
    if command and url:
        raise EntryError(
            'both "command" and "url" are set; a server is either stdio (command) or http/sse (url)'
        )
    transport = _transport(fields.get("type"), command, url)
    if transport == "stdio" and not command:
        raise EntryError('stdio server requires a "command"')
    if transport != "stdio" and not url:
        raise EntryError(f'{transport} server requires a "url"')
    cwd = _optional_str(fields, "cwd")
    if cwd is not None:
        cwd = root_path(cwd, base_dir)
    if command is not None and fields.get("root_command") and ("/" in command or "\\" in command):
        command = root_path(command, base_dir)
    include = fields.get("include_tools")
    config = ServerConfig(
        name=name,
        transport=transport,
        command=command if transport == "stdio" else None,
        args=tuple(_string_list(fields, "args") or ()),
        env=_string_map(fields, "env"),
        cwd=cwd if transport == "stdio" else None,
        url=url if transport != "stdio" else None,
        headers=_string_map(fields, "headers"),
        timeout_ms=_milliseconds(fields, "timeout_ms"),
        tool_timeout_ms=_milliseconds(fields, "tool_timeout_ms"),
        enabled=_boolean(fields.get("enabled")),
        include_tools=tuple(_string_list(fields, "include_tools") or ()) if include is not None else None,
        exclude_tools=tuple(_string_list(fields, "exclude_tools") or ()),
        oauth=_oauth(fields.get("oauth")),
        max_message_bytes=_byte_count(fields, "max_message_bytes"),
        share=_share(fields.get("share")),
        keep_warm=_keep_warm(fields.get("keep_warm")),
        idle_timeout_s=_seconds(fields.get("idle_timeout_s")),
        max_tools=tool_cap(fields.get("max_tools"), '"maxTools"'),
        sandbox=sandbox_setting(fields.get("sandbox"), '"sandbox"') if transport == "stdio" else None,
        pinning=_pinning(fields.get("pinning")),
    )
    return _with_fingerprint(config)


def _with_fingerprint(config: ServerConfig) -> ServerConfig:
    return replace(config, fingerprint=fingerprint_of(config))


def root_path(value: str, base_dir: Path) -> str:
    """A relative path rooted at the config file's folder; placeholders are left for later."""
    if "$" in value or "{" in value:
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base_dir / path)


def _transport(kind: Any, command: str | None, url: str | None) -> Transport:
    if kind is None:
        if command:
            return "stdio"
        if url:
            return "http"
        raise EntryError('needs a "command" (stdio) or a "url" (http/sse)')
    if not isinstance(kind, str) or kind not in TRANSPORT_ALIASES:
        raise EntryError(f"unknown server type {kind!r} (expected stdio, http or sse)")
    return TRANSPORT_ALIASES[kind]


def _optional_str(fields: Canonical, key: str) -> str | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise EntryError(f'"{key}" must be a string')
    return value


def _string_list(fields: Canonical, key: str) -> list[str] | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str | int | float) for item in value):
        raise EntryError(f'"{key}" must be a list of strings')
    return [str(item) for item in value]


def _string_map(fields: Canonical, key: str) -> dict[str, str]:
    value = fields.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise EntryError(f'"{key}" must be an object of strings')
    result: dict[str, str] = {}
    for item_key, item in value.items():
        if isinstance(item, bool):
            item = "true" if item else "false"
        if not isinstance(item, str | int | float):
            raise EntryError(f'"{key}.{item_key}" must be a string')
        result[str(item_key)] = str(item)
    return result


def _milliseconds(fields: Canonical, key: str) -> int | None:
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise EntryError(f"timeout {value!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise EntryError(f"timeout {value!r} must be a number >= 0")
    # JSON's Infinity/NaN, YAML's .inf and TOML's inf parse as floats that have no integer,
    # and a huge integer has no float: either would fail later, at connect time.
    if (isinstance(value, float) and not math.isfinite(value)) or value > MAX_TIMEOUT_MS:
        raise EntryError(f"timeout {value!r} is out of range (at most {MAX_TIMEOUT_MS}; 0 disables it)")
    return round(value)


def _byte_count(fields: Canonical, key: str) -> int | None:
    value = fields.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EntryError(f'"maxMessageBytes" must be a whole number of bytes >= 1, not {value!r}')
    return value


def tool_cap(value: Any, key: str) -> int | None:
    """A ``maxTools`` (or ``maxToolsPerServer``) value: a whole number of tools >= 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EntryError(f"{key} must be a whole number of tools >= 1, not {value!r}")
    return value


SANDBOX_KEYS = ("network", "paths", "readOnlyPaths")
SANDBOX_FIX = (
    'write true, false, or {"network": true|false, "paths": [folders it may write], '
    '"readOnlyPaths": [folders it may read]}'
)


def sandbox_setting(value: Any, key: str) -> Sandbox | None:
    """A ``"sandbox"`` value: ``true``, ``false`` or ``{"network", "paths", "readOnlyPaths"}``;
    ``None`` when absent. ``~`` is expanded here; a relative path stays relative (to the
    server's working folder, which only discovery knows)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return Sandbox(enabled=value)
    if not isinstance(value, Mapping):
        raise EntryError(f"{key} must be true, false or an object, not {value!r}; {SANDBOX_FIX}")
    unknown = sorted(str(name) for name in value if name not in SANDBOX_KEYS)
    if unknown:
        raise EntryError(
            f"{key} has unknown key {unknown[0]!r} (known: {', '.join(SANDBOX_KEYS)}); {SANDBOX_FIX}"
        )
    network = value.get("network", True)
    if not isinstance(network, bool):
        raise EntryError(f"{key}.network must be true or false, not {network!r}")
    return Sandbox(
        enabled=True,
        network=network,
        paths=_sandbox_paths(value.get("paths"), f"{key}.paths"),
        read_only_paths=_sandbox_paths(value.get("readOnlyPaths"), f"{key}.readOnlyPaths"),
    )


def _sandbox_paths(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
        raise EntryError(f'{key} must be a list of paths (absolute, "~/…" or relative to its working folder)')
    if any("\0" in item for item in value):
        raise EntryError(f"{key} holds a path with a NUL character; remove it")
    return tuple(str(Path(item).expanduser()) for item in value)


def _share(value: Any) -> Share | None:
    if value is None:
        return None
    for share in SHARES:
        if value == share:
            return share
    raise EntryError(f'"share" must be one of {", ".join(repr(share) for share in SHARES)}, not {value!r}')


def _pinning(value: Any) -> Pinning | None:
    if value is None:
        return None
    for pinning in PINNINGS:
        if value == pinning:
            return pinning
    raise EntryError(
        f'"pinning" must be one of {", ".join(repr(pinning) for pinning in PINNINGS)}, not {value!r} '
        '("strict", the default, withholds a changed tool until `mcpfleet tools approve`)'
    )


def _keep_warm(value: Any) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise EntryError(f'"keepWarm" must be true or false, not {value!r}')
    return value


def _seconds(value: Any) -> float | None:
    if value is None:
        return None
    seconds = as_seconds(value)
    if seconds is None:
        raise EntryError(f'"idleTimeout" must be a number of seconds from 0 to {MAX_SECONDS}, not {value!r}')
    return seconds


def as_seconds(value: Any) -> float | None:
    """``value`` as a number of seconds from 0 to ``MAX_SECONDS``, or ``None`` when it is not
    one. The range is checked first: it compares an int of any size exactly, and turns NaN
    and the infinities away, where converting a 400-digit int to a float would raise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_SECONDS:
        return None
    return float(value)


def _boolean(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "false", "0"):
        return value.lower() in ("true", "1")
    raise EntryError(f'"enabled" must be true or false, not {value!r}')


def _oauth(value: Any) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise EntryError('"oauth" must be an object')
    return dict(value)
