"""Plain data about a server's catalog, free of the SDK so the cache and the bridge can
use it without importing ``mcp`` (which costs ~0.6 s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolDefinition:
    """One tool as the server listed it."""

    name: str
    description: str | None = None
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: dict[str, Any] | None = None
    title: str | None = None
    annotations: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
            "output_schema": self.output_schema,
            "title": self.title,
            "annotations": self.annotations,
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
