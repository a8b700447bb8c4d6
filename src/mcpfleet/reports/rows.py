"""The rows of the ``status`` and ``tools`` reports and of their errors: one frozen record per line.

Each row's ``to_json()`` is its ``--json`` shape, key order included (the CLI contract fixes
it); ``COLUMNS`` names the table's columns. They are plain data, built by the report builders
here (``reports.status``, ``reports.tools``) and by the CLI, and drawn by ``cli.render``
(``config``'s rows, which draw themselves, stay there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from mcpfleet.config.model import SourceInfo
    from mcpfleet.errors import Failure


@dataclass(frozen=True)
class ServerRow:
    """One server of ``status``: its state after the gate, tools, timings and last error."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("server", "status", "tools", "ms", "source", "error")

    name: str
    status: str
    """The contract's set: connected, connecting, disconnected, failed, pending-approval, disabled."""
    state: str
    """``status``, or the finer ``reconnecting`` / ``suspended``."""
    tools: int
    deferred: bool
    at_gate: str | None
    """How the start-up gate served it (``live``, ``deferred``, ``waited``); None if it never started."""
    error: str | None
    stderr_tail: tuple[str, ...]
    source: SourceInfo
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    era: str | None = None
    protocol_version: str | None = None
    sandbox: str = "off"
    """The sandbox it runs in: ``bwrap``, ``landlock`` or ``off`` (``transport/sandbox.py``)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "state": self.state,
            "tools": self.tools,
            "deferred": self.deferred,
            "at_gate": self.at_gate,
            "error": self.error,
            "stderr_tail": list(self.stderr_tail),
            "source": self.source.to_dict(),
            "timings_ms": dict(self.timings_ms),
            "era": self.era,
            "protocol_version": self.protocol_version,
            "sandbox": self.sandbox,
        }


@dataclass(frozen=True)
class ToolRow:
    """One tool of ``tools``, as an agent sees it."""

    COLUMNS: ClassVar[tuple[str, ...]] = ("name", "server", "description")

    name: str
    server: str
    mcp_name: str
    description: str
    deferred: bool
    input_schema: Mapping[str, Any]
    withheld: bool = False
    """Changed or added since its server's tools were approved: not served (``tools review``)."""
    warnings: tuple[Mapping[str, str], ...] = ()
    """Its poisoning warnings (``fleet.poisoning``), each ``{"rule", "text"}``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "server": self.server,
            "mcp_name": self.mcp_name,
            "description": self.description,
            "deferred": self.deferred,
            "input_schema": self.input_schema,
            "withheld": self.withheld,
            "warnings": [dict(warning) for warning in self.warnings],
        }


@dataclass(frozen=True)
class ErrorRow:
    """A file or server that failed: ``{"path", "error"}`` (``mcp:<server>`` for a server)."""

    path: str
    error: str

    @classmethod
    def of(cls, failure: Failure) -> ErrorRow:
        return cls(failure.path, failure.message)

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "error": self.error}
