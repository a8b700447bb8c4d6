"""The ``hosts`` commands: which MCP hosts are set up here and whether each uses the gateway;
``hosts install HOST [--replace]`` and ``hosts uninstall HOST`` to wire one."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from mcpfleet.cli.options import FleetOptions
from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, output_line, report_error

if TYPE_CHECKING:
    from mcpfleet.hosts import Host, HostStatus, WiringReport

_HOST_IDS = ("claude-code", "cursor", "vscode", "codex", "gemini", "claude-desktop", "windsurf", "zed")
"""``mcpfleet.hosts.HOST_IDS``, repeated so that ``mcpfleet --help`` imports nothing more
(a test keeps the two equal)."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hosts = subparsers.add_parser(
        "hosts",
        help="MCP hosts found here and whether they use the gateway; install or uninstall its entry",
        description="Without an action: list the MCP hosts and whether each one's user config "
        "runs `mcpfleet serve`.",
    )
    hosts.set_defaults(handler=run_list)
    actions = hosts.add_subparsers(dest="hosts_action", metavar="ACTION")
    install = actions.add_parser(
        "install",
        help="write the gateway entry into HOST's user config (atomically, with a backup beside it)",
    )
    install.add_argument("host", choices=_HOST_IDS, metavar="HOST", help=", ".join(_HOST_IDS))
    install.add_argument(
        "--replace",
        action="store_true",
        help="also move aside, in that file, the entries the gateway serves (undone by `hosts uninstall`)",
    )
    install.add_argument(
        "--profile",
        metavar="NAME",
        help='the entry runs `mcpfleet serve --profile NAME` ("profiles" in mcpfleet\'s user config)',
    )
    install.set_defaults(handler=run_install)
    uninstall = actions.add_parser(
        "uninstall", help="remove the gateway entry from HOST's user config and restore what --replace moved"
    )
    uninstall.add_argument("host", choices=_HOST_IDS, metavar="HOST", help=", ".join(_HOST_IDS))
    uninstall.set_defaults(handler=run_uninstall)


def run_list(args: argparse.Namespace) -> int:
    from mcpfleet.hosts import host_status, known_hosts

    statuses = [host_status(host) for host in known_hosts(FleetOptions.from_args(args).project_root)]
    if args.json:
        emit_json({"hosts": [status.to_json() for status in statuses]})
        return EXIT_OK
    _print_table(statuses)
    return EXIT_OK


def _state(status: HostStatus) -> str:
    if status.error is not None:
        return "unreadable"
    if status.gateway_entries:
        return "uses the gateway"
    return "not wired" if status.found else "not found"


def _print_table(statuses: list[HostStatus]) -> None:
    from rich.table import Table

    from mcpfleet.cli.output import rich_text
    from mcpfleet.cli.render import console, print_table

    table = Table(title="MCP hosts")
    for column in ("Host", "Id", "State", "Moved aside", "User config"):
        table.add_column(column)
    for status in statuses:
        table.add_row(
            rich_text(status.host.name),
            rich_text(status.host.id),
            rich_text(_state(status)),
            rich_text(", ".join(status.replaced)),
            rich_text(status.host.path),
        )
    print_table(console(), table)
    for status in statuses:
        if status.error is not None:
            output_line(f"{status.host.name}: {status.error}")
    output_line("Wire one with `mcpfleet hosts install HOST` (add --replace to move its own servers aside).")


def _host(args: argparse.Namespace) -> Host:
    from mcpfleet.hosts import find_host

    return find_host(args.host, FleetOptions.from_args(args).project_root)


def run_install(args: argparse.Namespace) -> int:
    from mcpfleet.hosts import gateway_command, install_gateway, served_entries

    host = _host(args)
    serve_options: list[str] = []
    if args.profile is not None:
        from mcpfleet.config.profiles import read_gateway_settings

        read_gateway_settings().profile(args.profile)  # an unknown profile is refused here, not at start
        serve_options = ["--profile", args.profile]
    served: frozenset[str] = frozenset()
    if args.replace:
        from mcpfleet.config import load_all_mcp_configs

        # Discovery as `serve` runs it (no agent-side filter), without the project: a host's
        # user file is served in every project, so no one project decides what moves aside.
        options = replace(FleetOptions.from_args(args), enable_project_config=False)
        served = served_entries(
            load_all_mcp_configs(options.project_root, **options.discovery_settings()), host
        )
    return _wire(
        args,
        lambda: install_gateway(
            host, gateway_command(), replace=args.replace, served=served, serve_options=serve_options
        ),
    )


def run_uninstall(args: argparse.Namespace) -> int:
    from mcpfleet.hosts import uninstall_gateway

    host = _host(args)
    return _wire(args, lambda: uninstall_gateway(host))


def _wire(args: argparse.Namespace, change: Callable[[], WiringReport]) -> int:
    from mcpfleet.errors import ConfigError, ConfigWriteError, UnsafeConfigPathError

    try:
        report = change()
    except UnsafeConfigPathError as error:
        report_error(error)
        return EXIT_USAGE
    except ConfigWriteError as error:
        report_error(error)
        return EXIT_FAILED
    except ConfigError as error:
        report_error(error)
        return EXIT_USAGE
    if args.json:
        emit_json(report.to_json())
    else:
        for line in _describe(report, args.hosts_action, replace_asked=getattr(args, "replace", False)):
            output_line(line)
    return EXIT_OK


def _describe(report: WiringReport, action: str, *, replace_asked: bool) -> list[str]:
    host, path = report.host, report.host.path
    if not report.changed:
        if action == "uninstall":
            return [f"{host.name} has no gateway entry in {path}; nothing changed"]
        entries = ", ".join(f'"{name}"' for name in report.gateway_entries)
        nothing_to_move = " and no other entry there is served by the gateway" if replace_asked else ""
        return [
            f"{host.name} already has the gateway entry {entries} in {path}{nothing_to_move}; nothing changed"
        ]
    lines: list[str] = []
    if report.added:
        lines.append(f'{host.name}: added the gateway entry "{report.added[0]}" to {path}')
    if report.moved_aside:
        lines.append(
            f"{host.name}: moved aside {len(report.moved_aside)} server(s) the gateway now serves "
            f"({', '.join(report.moved_aside)}); `mcpfleet hosts uninstall {host.id}` puts them back"
        )
    elif replace_asked:
        lines.append(f"{host.name}: no other entry in {path} is served by the gateway; nothing moved aside")
    if report.removed:
        lines.append(f"{host.name}: removed the gateway entry ({', '.join(report.removed)}) from {path}")
    if report.restored:
        lines.append(f"{host.name}: put back {', '.join(report.restored)}")
    if report.backup is not None:
        lines.append(f"the file as it was is saved in {report.backup}")
    if action == "install":
        lines.append(f"restart {host.name} (or reload its MCP servers) to use the gateway")
    return lines
