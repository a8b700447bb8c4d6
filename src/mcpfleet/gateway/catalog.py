"""What the gateway serves at one moment, built from the fleet (no I/O, no SDK).

A ``ServedCatalog`` is an immutable snapshot: the tools every served backend offers, each
as the JSON the backend listed with only its ``name`` replaced by the served one, and the
map back from served names to ``(server, tool)``. It is rebuilt after every change of the
fleet, and two snapshots compare list by list (``changed_lists``), which is what decides
the ``list_changed`` notifications.

Which backends are served: every server the manager holds tools for, except one that was
given up (suspended by its crash breaker, or failed for good): a server being reconnected
keeps its tools listed, and a call to one waits for it (bounded by the fleet's policy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from mcpfleet.fleet.server import Phase
from mcpfleet.gateway.naming import NameCollision, NamingPolicy, ServedNames, assign_served_names
from mcpfleet.redaction import redact_text

if TYPE_CHECKING:
    from mcpfleet.client.definitions import ToolDefinition
    from mcpfleet.config.model import DiscoveryResult
    from mcpfleet.fleet.manager import MCPManager, StartupReport

ListKind = Literal["tools", "resources", "prompts"]

GIVEN_UP = frozenset({Phase.SUSPENDED, Phase.FAILED})
"""Phases of a server whose tools the gateway stops serving."""


@dataclass(frozen=True)
class ServedCatalog:
    """One snapshot of everything served, and the way back to each backend."""

    tools: tuple[dict[str, Any], ...] = ()
    tool_names: ServedNames = field(default_factory=ServedNames)
    collisions: tuple[NameCollision, ...] = ()

    @classmethod
    def empty(cls) -> ServedCatalog:
        return cls()

    def tool_target(self, served_name: str) -> tuple[str, str] | None:
        """``(server, tool)`` behind a served tool name."""
        return self.tool_names.resolve(served_name)

    def changed_lists(self, newer: ServedCatalog) -> list[ListKind]:
        """The lists (``tools``…) that differ between this snapshot and ``newer``."""
        changed: list[ListKind] = []
        if self.tools != newer.tools:
            changed.append("tools")
        return changed


def served_tool(definition: ToolDefinition, served_name: str) -> dict[str, Any]:
    """The tool as its backend listed it, under its served name.

    A definition read from a cache row written before the raw JSON was kept is rebuilt from
    the fields that row has.
    """
    if definition.raw is not None:
        tool = dict(definition.raw)
    else:
        tool = {"name": definition.name, "inputSchema": definition.input_schema}
        optional = {
            "description": definition.description,
            "title": definition.title,
            "outputSchema": definition.output_schema,
            "annotations": definition.annotations,
        }
        tool.update({key: value for key, value in optional.items() if value is not None})
    tool["name"] = served_name
    return tool


def build_catalog(manager: MCPManager, policy: NamingPolicy) -> ServedCatalog:
    """The snapshot of what ``manager``'s fleet serves now, named under ``policy``.

    Names are assigned over every tool the fleet holds, served or not, so a server that is
    given up and comes back never shifts another server's names.
    """
    held = manager.get_tools()
    names = assign_served_names(((tool.server_name, tool.mcp_tool_name) for tool in held), policy)
    phases = {name: manager.get_server_state(name).state for name in {tool.server_name for tool in held}}
    tools: list[dict[str, Any]] = []
    for tool in held:
        served_name = names.served(tool.server_name, tool.mcp_tool_name)
        if served_name is None or phases[tool.server_name] in GIVEN_UP:
            continue
        tools.append(served_tool(tool.definition, served_name))
    tools.sort(key=lambda entry: str(entry["name"]))
    return ServedCatalog(tools=tuple(tools), tool_names=names, collisions=tuple(names.collisions))


def instructions_for(
    manager: MCPManager, discovery: DiscoveryResult | None, report: StartupReport | None
) -> str:
    """What the gateway tells the model about itself: which servers it serves, and which it
    does not, each with the command that fixes it. Secrets are masked."""
    served = manager.get_all_server_names()
    tool_counts: Mapping[str, int] = _tool_counts(manager)
    lines = ["mcpfleet gateway: the MCP servers configured on this machine, served as one."]
    if served:
        listed = ", ".join(f"{name} ({tool_counts.get(name, 0)} tools)" for name in served)
        lines.append(f"Serving: {listed}.")
    else:
        lines.append("Serving no server yet.")
    not_served: list[str] = []
    for failure in report.failures if report is not None else ():
        if failure.kind == "approval":
            fix = f"a project server awaiting approval; run `mcpfleet approve {failure.subject}`"
        else:
            fix = f"failed ({failure.message}); run `mcpfleet status` for details"
        not_served.append(f"{failure.subject}: {fix}")
    if not_served:
        lines.append("Not served:")
        lines.extend(f"- {line}" for line in not_served)
    return redact_text("\n".join(lines))


def _tool_counts(manager: MCPManager) -> dict[str, int]:
    counts: dict[str, int] = {}
    for tool in manager.get_tools():
        counts[tool.server_name] = counts.get(tool.server_name, 0) + 1
    return counts
