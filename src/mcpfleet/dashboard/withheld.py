"""The tools a fleet withholds (``fleet.pinning``), as the approvals page shows them: each one's
diff against what was approved and its poisoning warnings, a changed tool before an added one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from mcpfleet.dashboard.source import WithheldChange

if TYPE_CHECKING:
    from mcpfleet.fleet.manager import MCPManager


def withheld_changes(backends: Iterable[tuple[str, MCPManager, str]]) -> list[WithheldChange]:
    """The withheld tools of each ``(key, manager, server name)``."""
    from mcpfleet.config.pins import PinStore, pin_key
    from mcpfleet.reports.pins import definition_diff, withheld_document

    store = PinStore()
    changes: list[WithheldChange] = []
    for key, manager, name in backends:
        config, source = manager.get_server_config(name), manager.get_source(name)
        if config is None or not manager.withheld_tools():
            continue
        document = withheld_document({name: pin_key(config, source)}, store)
        changes.extend(
            WithheldChange(
                key,
                row["server"],
                row["tool"],
                row["reason"],
                definition_diff(row["approved"], row["current"]),
                [f"[{warning['rule']}] {warning['text']}" for warning in row["warnings"]],
            )
            for row in document["withheld"]
        )
    # A changed tool first: what was approved now says something else.
    return sorted(changes, key=lambda change: (change.reason != "changed", change.server, change.tool))
