"""What is withheld of a fleet's tools (B15), read from the pin store: ``tools review --json``'s
document and each definition's diff. The CLI (``tools review``) and the dashboard's approvals
page build them here, so both show the same changes.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from mcpfleet.config.pins import PinKey, PinStore


def withheld_document(
    keys: dict[str, PinKey], store: PinStore, *, fleet: dict[str, PinKey] | None = None
) -> dict[str, Any]:
    """``tools review --json``: every tool kept pending in the store for the servers of
    ``keys``, each with the poisoning warnings of its current definition, read against its
    server's other tools and the tool names of every server of ``fleet`` (default: ``keys``)."""
    from mcpfleet.fleet.pinning import fleet_warnings

    rows: list[dict[str, Any]] = []
    current: dict[str, list[dict[str, Any]]] = {}
    for server, key in (fleet if fleet is not None else keys).items():
        pins = store.read(key)
        if pins is None:
            continue
        # What the server lists now, as far as the store knows: its approved tools, with the
        # definitions it changed to in their place.
        tools = {name: tool.definition for name, tool in pins.approved.items()}
        tools.update({name: tool.definition for name, tool in pins.pending.items()})
        current[server] = [
            definition if definition is not None else {"name": name} for name, definition in tools.items()
        ]
    warnings = fleet_warnings(current)
    for server, key in keys.items():
        pins = store.read(key)
        if pins is None:
            continue
        for tool, pending in sorted(pins.pending.items()):
            approved = pins.approved.get(tool)
            rows.append(
                {
                    "server": server,
                    "tool": tool,
                    "reason": "changed" if approved is not None else "added",
                    "approved": approved.definition if approved is not None else None,
                    "current": pending.definition if pending.definition is not None else {"name": tool},
                    "warnings": [warning.to_json() for warning in warnings.get((server, tool), [])],
                }
            )
    return {"withheld": rows}


def definition_diff(approved: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    """A unified diff of the two definitions as indented JSON, approved first."""

    def lines(definition: dict[str, Any] | None) -> list[str]:
        if definition is None:
            return []
        return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=False).splitlines()

    return list(
        difflib.unified_diff(lines(approved), lines(current), "approved", "current", lineterm="", n=3)
    )
