"""What the gateway serves at one moment, built from the fleet (no I/O, no SDK).

A ``ServedCatalog`` is an immutable snapshot: the tools, resources, resource templates and
prompts of every served backend, each as the JSON the backend listed with only its name (or
URI) replaced by the served one, and the maps back from served names and URIs to the
backend. It is rebuilt after every change of the fleet, and two snapshots compare list by
list (``changed_lists``), which is what decides the ``list_changed`` notifications.

Which backends are served: every server the fleet holds, except one that was given up
(suspended by its crash breaker, or failed for good): a server being reconnected keeps its
tools listed, and a call to one waits for it (bounded by the fleet's reconnect policy).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from mcpfleet.fleet.registry import Phase
from mcpfleet.gateway.listings import ServerListings
from mcpfleet.gateway.naming import (
    NameCollision,
    NamingPolicy,
    ServedNames,
    assign_served_names,
    served_uri,
    split_served_uri,
)
from mcpfleet.redaction import redact_text

if TYPE_CHECKING:
    from mcpfleet.client.definitions import ToolDefinition
    from mcpfleet.fleet.startup import StartupReport
    from mcpfleet.gateway.served_fleet import ServedFleet

ListKind = Literal["tools", "resources", "prompts"]

GIVEN_UP = frozenset({Phase.SUSPENDED, Phase.FAILED})
"""Phases of a server whose tools, resources and prompts the gateway stops serving."""

_TEMPLATE_EXPRESSION = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class ServedCatalog:
    """One snapshot of everything served, and the way back to each backend."""

    policy: NamingPolicy = field(default_factory=NamingPolicy)
    tools: tuple[dict[str, Any], ...] = ()
    resources: tuple[dict[str, Any], ...] = ()
    resource_templates: tuple[dict[str, Any], ...] = ()
    prompts: tuple[dict[str, Any], ...] = ()
    tool_names: ServedNames = field(default_factory=ServedNames)
    prompt_names: ServedNames = field(default_factory=ServedNames)
    resource_owners: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Each backend URI served now, and the servers that list it."""
    backend_templates: tuple[tuple[str, str], ...] = ()
    """``(server, URI template)`` of every served template, as the backend wrote it."""
    collisions: tuple[NameCollision, ...] = ()

    def tool_target(self, served_name: str) -> tuple[str, str] | None:
        """``(server, tool)`` behind a served tool name."""
        return self.tool_names.resolve(served_name)

    def prompt_target(self, served_name: str) -> tuple[str, str] | None:
        """``(server, prompt)`` behind a served prompt name."""
        return self.prompt_names.resolve(served_name)

    def resource_target(self, uri: str) -> tuple[str, str] | None:
        """``(server, backend URI)`` for a URI a client reads or subscribes to.

        A served URI leads back to its server. A backend URI (under ``--prefix none``, or met
        in a tool's result) goes to the one server that lists it, else to the one server with
        a template it matches; a URI that several servers could own is not guessed.
        """
        split = split_served_uri(uri) if self.policy.prefix == "always" else None
        if split is not None:
            return split
        owners = self.resource_owners.get(uri, ())
        if len(owners) == 1:
            return owners[0], uri
        matching = {server for server, template in self.backend_templates if _template_matches(template, uri)}
        if len(matching) == 1:
            return matching.pop(), uri
        return None

    def served_uri(self, server: str, uri: str) -> str:
        return served_uri(server, uri, self.policy)

    def changed_lists(self, newer: ServedCatalog) -> list[ListKind]:
        """The lists that differ between this snapshot and ``newer`` (templates count as resources)."""
        changed: list[ListKind] = []
        if self.tools != newer.tools:
            changed.append("tools")
        if self.resources != newer.resources or self.resource_templates != newer.resource_templates:
            changed.append("resources")
        if self.prompts != newer.prompts:
            changed.append("prompts")
        return changed

    @cached_property
    def servers_with_tools(self) -> dict[str, int]:
        """Served tools per server."""
        counts: dict[str, int] = {}
        for server, _ in self.tool_names.by_served.values():
            counts[server] = counts.get(server, 0) + 1
        return counts


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


def build_catalog(
    fleet: ServedFleet, policy: NamingPolicy, listings: Mapping[str, ServerListings] | None = None
) -> ServedCatalog:
    """The snapshot of what ``fleet`` serves now, named under ``policy``.

    Names are assigned over everything the fleet holds, served or not, so a server that is
    given up and comes back never shifts another server's names.
    """
    listings = listings or {}
    held_servers = set(fleet.get_all_server_names())
    served_servers = {name for name in held_servers if fleet.get_server_state(name).state not in GIVEN_UP}

    held_tools = fleet.get_tools()
    tool_names = assign_served_names(((tool.server_name, tool.mcp_tool_name) for tool in held_tools), policy)
    tools = [
        served_tool(tool.definition, served_name)
        for tool in held_tools
        if tool.server_name in served_servers
        and (served_name := tool_names.served(tool.server_name, tool.mcp_tool_name)) is not None
    ]

    held_listings = {server: kinds for server, kinds in sorted(listings.items()) if server in held_servers}
    prompt_pairs = [
        (server, prompt["name"])
        for server, kinds in held_listings.items()
        for prompt in kinds.get("prompts", [])
        if isinstance(prompt.get("name"), str)
    ]
    prompt_names = assign_served_names(prompt_pairs, policy, kind="prompt")
    prompts: list[dict[str, Any]] = []
    resources: list[dict[str, Any]] = []
    templates: list[dict[str, Any]] = []
    owners: dict[str, list[str]] = {}
    backend_templates: list[tuple[str, str]] = []
    collisions = [*tool_names.collisions, *prompt_names.collisions]
    served_uris: dict[str, str] = {}
    for server, kinds in held_listings.items():
        if server not in served_servers:
            continue
        for prompt in kinds.get("prompts", []):
            served_name = prompt_names.served(server, str(prompt.get("name")))
            if served_name is not None:
                prompts.append({**prompt, "name": served_name})
        for resource in kinds.get("resources", []):
            uri = resource.get("uri")
            if isinstance(uri, str):
                owners.setdefault(uri, []).append(server)
                if _claim(served_uris, served_uri(server, uri, policy), server, "resource", collisions):
                    resources.append({**resource, "uri": served_uri(server, uri, policy)})
        for template in kinds.get("resource_templates", []):
            pattern = template.get("uriTemplate")
            if isinstance(pattern, str):
                backend_templates.append((server, pattern))
                served_pattern = served_uri(server, pattern, policy)
                if _claim(served_uris, served_pattern, server, "resource template", collisions):
                    templates.append({**template, "uriTemplate": served_pattern})

    return ServedCatalog(
        policy=policy,
        tools=tuple(sorted(tools, key=lambda entry: str(entry["name"]))),
        resources=tuple(resources),
        resource_templates=tuple(templates),
        prompts=tuple(sorted(prompts, key=lambda entry: str(entry["name"]))),
        tool_names=tool_names,
        prompt_names=prompt_names,
        resource_owners={uri: tuple(servers) for uri, servers in owners.items()},
        backend_templates=tuple(backend_templates),
        collisions=tuple(collisions),
    )


def _claim(
    claimed: dict[str, str], uri: str, server: str, kind: str, collisions: list[NameCollision]
) -> bool:
    """Whether ``server`` may serve ``uri``: the first server in name order keeps a URI two
    servers would serve alike (only possible with ``--prefix none``)."""
    owner = claimed.setdefault(uri, server)
    if owner == server:
        return True
    collisions.append(NameCollision(kind, uri, (owner, server)))
    return False


def _template_matches(template: str, uri: str) -> bool:
    """Whether ``uri`` could be an expansion of the RFC 6570 ``template`` (any value per expression)."""
    pieces = _TEMPLATE_EXPRESSION.split(template)
    pattern = ".*".join(re.escape(piece) for piece in pieces)
    return re.fullmatch(pattern, uri, flags=re.DOTALL) is not None


def instructions_for(fleet: ServedFleet, report: StartupReport | None, catalog: ServedCatalog) -> str:
    """What the gateway tells the model about itself: which servers it serves, and which it
    does not, each with the command that fixes it. Secrets are masked."""
    lines = ["mcpfleet gateway: the MCP servers configured for this user and project, served as one."]
    serving: list[str] = []
    not_served: list[str] = []
    failures = {failure.subject: failure for failure in report.failures} if report is not None else {}
    for name in fleet.get_all_server_names():
        state = fleet.get_server_state(name)
        if state.state in GIVEN_UP or name in failures:
            reason = failures[name].message if name in failures else state.last_error or state.state
            not_served.append(f"{name}: failed ({reason}); run `mcpfleet status` for details")
        elif state.status == "connected" or name in catalog.servers_with_tools:
            serving.append(f"{name} ({catalog.servers_with_tools.get(name, 0)} tools)")
        else:
            serving.append(f"{name} (starting; its tools appear when it is ready)")
    for subject, failure in failures.items():
        if subject not in fleet.get_all_server_names():
            if failure.kind == "approval":
                fix = f"a project server awaiting approval; run `mcpfleet approve {subject}`"
            else:
                fix = f"cannot start ({failure.message}); run `mcpfleet status` for details"
            not_served.append(f"{subject}: {fix}")
    lines.append(f"Serving: {', '.join(serving)}." if serving else "Serving no server.")
    if not_served:
        lines.append("Not served:")
        lines.extend(f"- {line}" for line in not_served)
    return redact_text("\n".join(lines))
