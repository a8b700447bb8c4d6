"""The config commands: ``config``, ``approve``, ``revoke``, ``add``, ``remove``, ``enable``,
``disable``. They read through discovery and write only mcpfleet's own files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.cli.add_server import add_server_arguments
from mcpfleet.cli.main import strict_option
from mcpfleet.cli.options import FleetOptions
from mcpfleet.cli.output import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    emit_json,
    error_line,
    output_line,
    report_error,
)

if TYPE_CHECKING:
    from mcpfleet.config.writer import Scope
    from mcpfleet.errors import ConfigWriteError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = subparsers.add_parser("config", help="list discovered servers with source, level, state and why")
    strict_option(config, "exit 1 when any entry or file is invalid")
    config.set_defaults(handler=run_config)

    approve = subparsers.add_parser(
        "approve",
        help="approve project servers (stored outside the repository): for each NAME, the entry "
        "that would be active, or the one in --source",
    )
    approve.add_argument("names", nargs="+", metavar="NAME")
    approve.add_argument(
        "--source",
        type=Path,
        metavar="PATH",
        help="the config file of the entry to approve, as `mcpfleet config` shows it "
        "(relative to the project root)",
    )
    approve.set_defaults(handler=run_approve)

    revoke = subparsers.add_parser("revoke", help="revoke approvals of project servers")
    revoke.add_argument("names", nargs="+", metavar="NAME")
    revoke.set_defaults(handler=run_revoke)

    add = subparsers.add_parser(
        "add",
        help="add a server to mcpfleet's own config",
        description="Add a stdio server (--command CMD [--arg ARG]…) or an HTTP/SSE one (--url URL).",
    )
    add_server_arguments(add)
    add.set_defaults(handler=run_add)

    remove = subparsers.add_parser("remove", help="remove a server from mcpfleet's own config")
    remove.add_argument("name", metavar="NAME")
    remove.add_argument(
        "--project", action="store_true", help="edit the project file instead of the user file"
    )
    remove.set_defaults(handler=run_remove)

    for command, enabled in (("enable", True), ("disable", False)):
        toggle = subparsers.add_parser(command, help=f"{command} a server (any tool's) for mcpfleet")
        toggle.add_argument("name", metavar="NAME")
        toggle.set_defaults(handler=run_enable if enabled else run_disable)


def run_config(args: argparse.Namespace) -> int:
    from mcpfleet.cli.render import EntryRow
    from mcpfleet.reports.rows import ErrorRow

    options = FleetOptions.from_args(args)
    result = options.discover()
    rows = [EntryRow.of(entry) for entry in result.entries]
    errors = [ErrorRow.of(error) for error in result.errors]
    failed = bool(errors) or any(row.state == "invalid" for row in rows)
    exit_code = EXIT_FAILED if args.strict and failed else EXIT_OK
    if args.json:
        emit_json(
            {"servers": [row.to_json() for row in rows], "errors": [error.to_json() for error in errors]}
        )
        return exit_code
    from mcpfleet.cli.render import console, print_config

    print_config(str(options.project_root), rows, console())
    for error in errors:
        error_line(error.error)
    return exit_code


def _report(args: argparse.Namespace, payload: dict[str, Any], lines: list[str]) -> None:
    if args.json:
        emit_json(payload)
    else:
        for line in lines:
            output_line(line)


def run_approve(args: argparse.Namespace) -> int:
    from mcpfleet.config.approval import approve_project_servers

    options = FleetOptions.from_args(args)
    root = options.project_root
    source = root / args.source.expanduser() if args.source is not None else None
    result = options.discover(all_project_entries=True)
    made, unknown = approve_project_servers(result.entries, args.names, source=source)
    where = f"{args.source}" if args.source is not None else str(root)
    for name in unknown:
        error_line(f'no project server named "{name}" in {where}; `mcpfleet config` lists them')
    _report(
        args,
        {"approved": [{"name": item.name, "path": item.path} for item in made], "unknown": unknown},
        [f"approved {item.name} ({item.path})" for item in made],
    )
    return EXIT_USAGE if unknown else EXIT_OK


def run_revoke(args: argparse.Namespace) -> int:
    from mcpfleet.config.approval import ApprovalStore

    store = ApprovalStore()
    root = FleetOptions.from_args(args).project_root
    revoked = [name for name in dict.fromkeys(args.names) if store.revoke_in_project(root, name)]
    unknown = [name for name in args.names if name not in revoked]
    for name in unknown:
        error_line(f'"{name}" has no approval in {root}; nothing to revoke')
    _report(args, {"revoked": revoked, "unknown": unknown}, [f"revoked {name}" for name in revoked])
    return EXIT_USAGE if unknown else EXIT_OK


def run_add(args: argparse.Namespace) -> int:
    from mcpfleet.cli.add_server import AddServerUsageError, NewServer, add_new_server
    from mcpfleet.errors import ConfigWriteError

    try:
        server = NewServer.from_arguments(args)
    except AddServerUsageError as error:
        error_line(f"{error} See `mcpfleet add --help`.")
        return EXIT_USAGE
    try:
        path = add_new_server(server, FleetOptions.from_args(args).project_root)
    except ConfigWriteError as error:
        return _write_failed(error)
    _report(args, {"added": server.name, "path": str(path)}, [f"added {server.name} to {path}"])
    return EXIT_OK


def _write_failed(error: ConfigWriteError) -> int:
    """Report a failed edit; a refused link is a problem in the files (exit 2), not a failed operation."""
    from mcpfleet.errors import UnsafeConfigPathError

    report_error(error)
    return EXIT_USAGE if isinstance(error, UnsafeConfigPathError) else EXIT_FAILED


def run_remove(args: argparse.Namespace) -> int:
    from mcpfleet.config.writer import confined_target, own_config_file, own_config_root, remove_server
    from mcpfleet.errors import ConfigWriteError

    scope: Scope = "project" if args.project else "user"
    options = FleetOptions.from_args(args)
    root = options.project_root
    path = own_config_file(scope, root)
    try:
        # A planted link is refused as such first: discovery reads a link to a user-level file
        # as that user file, so "no server named" would hide what is wrong with the project.
        confined_target(path, own_config_root(scope, root))
    except ConfigWriteError as error:
        return _write_failed(error)
    discovery = options.discover(all_project_entries=True)
    # An unreadable file is left to remove_server, whose error says what is wrong with it.
    readable = all(error.path != str(path) for error in discovery.errors)
    declared = any(entry.name == args.name and entry.source.path == str(path) for entry in discovery.entries)
    if readable and not declared:
        error_line(
            f'no server named "{args.name}" in {path}; `mcpfleet config` lists every server and its file'
        )
        return EXIT_USAGE
    try:
        remove_server(path, args.name, root=own_config_root(scope, root))
    except ConfigWriteError as error:
        return _write_failed(error)
    _report(args, {"removed": args.name, "path": str(path)}, [f"removed {args.name} from {path}"])
    return EXIT_OK


def _toggle(args: argparse.Namespace, enabled: bool) -> int:
    from mcpfleet.config.writer import set_server_enabled
    from mcpfleet.errors import ConfigWriteError

    options = FleetOptions.from_args(args)
    known = {entry.name for entry in options.discover(all_project_entries=True).entries}
    if args.name not in known:
        error_line(f'no server named "{args.name}" was found; `mcpfleet config` lists them')
        return EXIT_USAGE
    try:
        path = set_server_enabled(args.name, enabled, project_root=options.project_root)
    except ConfigWriteError as error:
        return _write_failed(error)
    verb = "enabled" if enabled else "disabled"
    _report(args, {verb: args.name, "path": str(path)}, [f"{verb} {args.name} (recorded in {path})"])
    return EXIT_OK


def run_enable(args: argparse.Namespace) -> int:
    return _toggle(args, True)


def run_disable(args: argparse.Namespace) -> int:
    return _toggle(args, False)
