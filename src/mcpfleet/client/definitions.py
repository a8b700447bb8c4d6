"""Plain data about a server's catalog, free of the SDK so the cache and the tool objects can
use it without importing ``mcp`` (which costs ~0.6 s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

LEGACY_ERA = "legacy"
"""The era verdict of a server that speaks the ``initialize`` handshake (protocol ≤ 2025-11-25)."""

EraVerdict: TypeAlias = str | dict[str, Any]
"""What first contact showed about a server's protocol era, as remembered in the tool cache:
``LEGACY_ERA``, or the server's ``server/discover`` answer (a ``DiscoverResult`` as JSON) for a
server that speaks the 2026-07-28 revision. The next connection uses it instead of probing."""

Era = Literal["legacy", "modern"]
"""The era a connection speaks: the ``initialize`` handshake, or 2026-07-28's per-request ``_meta``."""

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
"""An MCP log level (RFC 5424 severities, least severe first)."""

DEFAULT_PROBE_TIMEOUT_MS = 1000
"""How long first contact waits for a ``server/discover`` answer before the SDK falls back to
``initialize``. A server that answers at all answers within milliseconds (modern servers with
their ``DiscoverResult``, legacy ones with "method not found"); only one that silently drops
unknown requests reaches the bound, and it is remembered as legacy, so it costs this once."""


@dataclass(frozen=True)
class ToolDefinition:
    """One tool as the server listed it."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: dict[str, Any] | None = None
    title: str | None = None
    annotations: dict[str, Any] | None = None
    raw: dict[str, Any] | None = None
    """The tool exactly as the server's ``tools/list`` gave it (its JSON, icons, ``_meta`` and
    ``execution`` included), so the gateway serves it unchanged; ``None`` in cache rows written
    before it was kept."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "title": self.title,
            "annotations": self.annotations,
            "raw": self.raw,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolDefinition:
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError("tool definition without a name")
        schema = data.get("input_schema")
        return cls(
            name=name,
            description=data.get("description"),
            input_schema=schema if isinstance(schema, dict) else {"type": "object", "properties": {}},
            output_schema=data.get("output_schema"),
            title=data.get("title"),
            annotations=data.get("annotations"),
            raw=raw if isinstance(raw := data.get("raw"), dict) and raw.get("name") == name else None,
        )


@dataclass(frozen=True)
class ServerInfo:
    """Who answered the handshake."""

    name: str
    version: str
    protocol_version: str
    instructions: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "protocol_version": self.protocol_version,
            "instructions": self.instructions,
        }
