"""``mcpfleet tools review [SERVER]`` and ``mcpfleet tools approve SERVER [TOOL…]`` (B15).

Both read the pin store (``config.pins``) and start no server: what is withheld is what a
fleet (a session, the gateway, the daemon) last saw and kept there for review. ``approve``
writes the store; every running fleet withholding those tools sees the write and serves them,
announcing ``list_changed`` to its clients (``fleet.pinning``).
"""

from __future__ import annotations

import argparse
from typing import Any

from mcpfleet.cli.options import FleetOptions
from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, error_line, output_line
from mcpfleet.config.model import DiscoveryResult, ServerConfig, SourceInfo
from mcpfleet.config.pins import PinKey, PinStore, pin_key
from mcpfleet.reports.pins import definition_diff, withheld_document


def pin_command(args: argparse.Namespace) -> int:
    if args.action == "review":
        return review_command(args)
    return approve_command(args)


def _declared_entries(discovery: DiscoveryResult) -> dict[str, tuple[ServerConfig, SourceInfo]]:
    """Each declared server's entry: the active one, else the first usable one of that name."""
    declared = {
        name: (config, discovery.sources[name])
        for name, config in discovery.configs.items()
        if name in discovery.sources
    }
    for entry in discovery.entries:
        if entry.config is not None:
            declared.setdefault(entry.name, (entry.config, entry.source))
    return declared


def _server_keys(
    args: argparse.Namespace, name: str | None
) -> tuple[dict[str, PinKey], dict[str, PinKey], int | None]:
    """The pin keys of the servers asked for (every declared one when ``name`` is None) and of
    every declared server; or an exit code after one error line naming the server and what
    may have been meant."""
    from mcpfleet.reports import messages

    discovery = FleetOptions.from_args(args).discover(all_project_entries=True)
    declared = {server: pin_key(*entry) for server, entry in sorted(_declared_entries(discovery).items())}
    if name is None:
        return declared, declared, None
    if name not in declared:
        error_line(messages.unknown_server_message(name, [entry.name for entry in discovery.entries]))
        return {}, declared, EXIT_USAGE
    return {name: declared[name]}, declared, None


_NOUNS = {"prompts": "prompt", "resources": "resource", "resourceTemplates": "resource template"}


def withheld_catalog(
    keys: dict[str, PinKey], store: PinStore
) -> list[tuple[str, str, str, dict[str, Any] | None, dict[str, Any]]]:
    """The prompts, resources and templates kept pending for these servers: (server, noun,
    name, approved definition or None, current definition). Not in ``tools review --json``,
    whose shape is the tools' contract; ``tools approve SERVER`` accepts them."""
    from mcpfleet.config.pins import CATALOG_KINDS

    found: list[tuple[str, str, str, dict[str, Any] | None, dict[str, Any]]] = []
    for server, key in keys.items():
        for kind in CATALOG_KINDS:
            pins = store.read_catalog(key, kind)
            if pins is None:
                continue
            for name, pending in sorted(pins.pending.items()):
                approved = pins.approved.get(name)
                found.append(
                    (
                        server,
                        _NOUNS[kind],
                        name,
                        approved.definition if approved is not None else None,
                        pending.definition or {},
                    )
                )
    return found


def review_command(args: argparse.Namespace) -> int:
    if len(args.names) > 1:
        error_line("`mcpfleet tools review [SERVER]` takes one server at most; `tools approve` takes tools")
        return EXIT_USAGE
    keys, fleet, failed = _server_keys(args, args.names[0] if args.names else None)
    if failed is not None:
        return failed
    document = withheld_document(keys, PinStore(), fleet=fleet)
    if args.json:
        emit_json(document)
        return EXIT_OK
    rows = document["withheld"]
    others = withheld_catalog(keys, PinStore())
    if not rows and not others:
        output_line("no tool is withheld: every tool served is the one approved")
        return EXIT_OK
    for server, noun, name, approved, current in others:
        output_line(f"{server}: {noun} {name!r}: {'changed since it was approved' if approved else 'added'}")
        for line in definition_diff(approved, current):
            output_line(f"  {line}")
        output_line("")
    for row in rows:
        what = "changed since it was approved" if row["reason"] == "changed" else "added since approval"
        output_line(f"{row['server']}/{row['tool']}: {what}")
        if set(row["current"]) == {"name"}:
            output_line("  (its definition was too large to keep: only its fingerprint is pinned)")
        for line in definition_diff(row["approved"], row["current"]):
            output_line(f"  {line}")
        for warning in row["warnings"]:
            output_line(f"  warning [{warning['rule']}]: {warning['text']}")
        output_line("")
    servers = sorted({row["server"] for row in rows} | {server for server, *_ in others})
    output_line(
        f"accept with `mcpfleet tools approve {servers[0] if len(servers) == 1 else 'SERVER'} [TOOL…]`; "
        "until then these tools are not served"
    )
    return EXIT_OK


def approve_command(args: argparse.Namespace) -> int:
    if not args.names:
        error_line("`mcpfleet tools approve` needs a server: `mcpfleet tools approve SERVER [TOOL…]`")
        return EXIT_USAGE
    server, *tools = args.names
    keys, _, failed = _server_keys(args, server)
    if failed is not None:
        return failed
    store = PinStore()
    key = keys[server]
    pins = store.read(key)
    pending = set(pins.pending) if pins is not None else set()
    unknown = [tool for tool in tools if tool not in pending]
    if unknown:
        listed = ", ".join(repr(tool) for tool in unknown)
        error_line(
            f"server {server!r} has no withheld tool {listed} "
            f"(`mcpfleet tools review {server}` lists what is withheld)"
        )
        return EXIT_FAILED
    approved = store.approve(key, tools or None)
    # Naming no tool accepts the server's withheld prompts and resources too.
    others = store.approve_catalog(key) if not tools else {}
    if args.json:
        emit_json({"approved": [{"server": server, "tool": tool} for tool in approved]})
    elif not approved and not others:
        output_line(f"server {server!r} has no withheld tool: nothing to approve")
    else:
        for tool in approved:
            output_line(f"approved {server}/{tool}: served from now on, running sessions are told")
        for kind, names in others.items():
            for name in names:
                output_line(f"approved {server}'s {_NOUNS[kind]} {name!r}")
    return EXIT_OK
