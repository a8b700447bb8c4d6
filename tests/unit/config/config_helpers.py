"""Helpers shared by the discovery tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcpfleet import load_all_mcp_configs
from mcpfleet.agent.loader import AgentDiscoveryResult
from mcpfleet.config import DiscoveredEntry, DiscoveryResult

WriteFile = Callable[[Path, Any], Path]


def discover(project: Path, **options: Any) -> AgentDiscoveryResult:
    return load_all_mcp_configs(project, **options)


def entry(result: DiscoveryResult, name: str, provider: str | None = None) -> DiscoveredEntry:
    """The first entry named ``name`` (from ``provider`` when given)."""
    for item in result.entries:
        if item.name == name and (provider is None or item.source.provider == provider):
            return item
    raise AssertionError(
        f"no entry {name!r} ({provider}) in {[(e.name, e.source.provider) for e in result.entries]}"
    )
