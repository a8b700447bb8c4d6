"""The config commands: ``config``, ``approve``, ``revoke``, ``add``, ``remove``, ``enable``,
``disable``. They read through discovery and write only mcpfleet's own files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcpfleet.cli.main import project_root, strict_option, trust_project
from mcpfleet.cli.output import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    emit_json,
    error_line,
    output_line,
    rich_text,
)

if TYPE_CHECKING:
    from mcpfleet.config.model import DiscoveredEntry, DiscoveryResult
    from mcpfleet.config.writer import Scope
    from mcpfleet.errors import ConfigWriteError

STATE_STYLES = {
    "active": "green",
    "disabled": "dim",
    "shadowed": "yellow",
    "pending-approval": "magenta",
    "invalid": "red",
    "filtered": "cyan",
}


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

    add = subparsers.add_parser("add", help="add a server to mcpfleet's own config")
    add.add_argument("name", metavar="NAME")
    target = add.add_mutually_exclusive_group(required=True)
    # ``dest`` differs from the option: ``args.command`` is the sub-command's name.
    target.add_argument("--command", dest="server_command", help="executable of a stdio server")
    target.add_argument("--url", help="URL of an HTTP or SSE server")
    add.add_argument(
        "--arg",
        dest="args",
        action="append",
        default=[],
        metavar="ARG",
        help="repeatable; --arg=-x for dash values",
    )
    add.add_argument("--env", action="append", default=[], type=_pair, metavar="K=V", help="repeatable")
    add.add_argument("--header", action="append", default=[], type=_pair, metavar="K=V", help="repeatable")
    add.add_argument("--transport", choices=("http", "sse"), default="http", help="for --url (default http)")
    add.add_argument("--project", action="store_true", help="write the project file instead of the user file")
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


def _pair(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def _discover(args: argparse.Namespace, *, all_project_entries: bool = False) -> DiscoveryResult:
    from mcpfleet.config import load_all_mcp_configs

    return load_all_mcp_configs(
        project_root(args),
        enable_project_config=all_project_entries or not args.no_project_config,
        extra_config_paths=args.extra_configs,
        trust_project=trust_project(args) and not all_project_entries,
    )


def _entry_json(entry: DiscoveredEntry) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": entry.name,
        "transport": entry.transport,
        "state": entry.state,
        "reason": entry.reason,
        "source": entry.source.to_dict(),
    }
    review = _review(entry)
    if review is not None:
        data["review"] = review
    return data


def _review(entry: DiscoveredEntry) -> dict[str, Any] | None:
    """What a pending entry would run, for the user to review before approving it.

    Only a pending entry has one: its config is still the text of the file (nothing was
    substituted), and the values of its env and headers are left out, names only.
    """
    config = entry.config
    if entry.state != "pending-approval" or config is None:
        return None
    if config.transport == "stdio":
        return {
            "command": config.command,
            "args": list(config.args),
            "cwd": config.cwd,
            "env": sorted(config.env),
        }
    return {"url": config.url, "headers": sorted(config.headers)}


def _review_line(entry: DiscoveredEntry, review: dict[str, Any]) -> str:
    import shlex

    if "command" in review:
        parts = [f"runs: {shlex.join([review['command'], *review['args']])}"]
        if review["cwd"]:
            parts.append(f"in: {review['cwd']}")
        if review["env"]:
            parts.append(f"env: {', '.join(review['env'])}")
    else:
        parts = [f"url: {review['url']}"]
        if review["headers"]:
            parts.append(f"headers: {', '.join(review['headers'])}")
    line = f"  {entry.name} ({entry.source.path})  " + "  ".join(parts)
    # The repository wrote these words: an escape sequence in them must not reach the terminal.
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode() for char in line)


def run_config(args: argparse.Namespace) -> int:
    result = _discover(args)
    failed = bool(result.errors) or any(entry.state == "invalid" for entry in result.entries)
    exit_code = EXIT_FAILED if args.strict and failed else EXIT_OK
    if args.json:
        emit_json(
            {
                "servers": [_entry_json(entry) for entry in result.entries],
                "errors": [error.to_dict() for error in result.errors],
            }
        )
        return exit_code
    from rich.console import Console
    from rich.table import Table

    table = Table(title=rich_text(f"MCP servers for {project_root(args)}"))
    for column in ("Name", "State", "Transport", "Level", "Source", "Reason"):
        table.add_column(column, overflow="fold")
    for entry in result.entries:
        style = STATE_STYLES.get(entry.state, "")
        table.add_row(
            rich_text(entry.name),
            f"[{style}]{entry.state}[/]",
            rich_text(entry.transport or "-"),
            entry.source.level,
            rich_text(f"{entry.source.provider_name}: {entry.source.path}"),
            rich_text(entry.reason, multiline=True),
        )
    # Off a terminal (a pipe, a log) rich would wrap at 80 columns; paths and reasons need more.
    console = Console(width=None if sys.stdout.isatty() else 200)
    if result.entries:
        console.print(table)
    else:
        console.print("No MCP servers found. Add one with `mcpfleet add NAME --command CMD`.")
    pending = [(entry, review) for entry in result.entries if (review := _review(entry)) is not None]
    if pending:
        from rich.text import Text

        # Text, not markup: these lines are the repository's own words.
        console.print("Pending project servers: review what they run, then `mcpfleet approve NAME`:")
        for entry, review in pending:
            console.print(Text(_review_line(entry, review)), soft_wrap=True)
    for error in result.errors:
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

    root = project_root(args)
    source = root / args.source.expanduser() if args.source is not None else None
    result = _discover(args, all_project_entries=True)
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
    root = project_root(args)
    revoked = [name for name in dict.fromkeys(args.names) if store.revoke_in_project(root, name)]
    unknown = [name for name in args.names if name not in revoked]
    for name in unknown:
        error_line(f'"{name}" has no approval in {root}; nothing to revoke')
    _report(args, {"revoked": revoked, "unknown": unknown}, [f"revoked {name}" for name in revoked])
    return EXIT_USAGE if unknown else EXIT_OK


def run_add(args: argparse.Namespace) -> int:
    from mcpfleet.config.writer import add_server, own_config_file, own_config_root
    from mcpfleet.errors import ConfigWriteError

    entry: dict[str, Any]
    if args.server_command is not None:
        entry = {"command": args.server_command}
        if args.args:
            entry["args"] = args.args
        if args.env:
            entry["env"] = dict(args.env)
    else:
        entry = {"type": args.transport, "url": args.url}
        if args.header:
            entry["headers"] = dict(args.header)
    scope: Scope = "project" if args.project else "user"
    root = project_root(args)
    path = own_config_file(scope, root)
    try:
        add_server(path, args.name, entry, root=own_config_root(scope, root))
    except ConfigWriteError as error:
        return _write_failed(error)
    if args.project:
        _approve_own_entry(args, path)
    _report(args, {"added": args.name, "path": str(path)}, [f"added {args.name} to {path}"])
    return EXIT_OK


def _approve_own_entry(args: argparse.Namespace, path: Path) -> None:
    """The user just typed this project entry, so it needs no separate approval."""
    from mcpfleet.config.approval import ApprovalStore

    store = ApprovalStore()
    for entry in _discover(args, all_project_entries=True).entries:
        if entry.name == args.name and entry.source.path == str(path) and entry.config is not None:
            store.approve(entry)


def _write_failed(error: ConfigWriteError) -> int:
    """Report a failed edit; a refused link is a problem in the files (exit 2), not a failed operation."""
    from mcpfleet.errors import UnsafeConfigPathError

    error_line(str(error))
    return EXIT_USAGE if isinstance(error, UnsafeConfigPathError) else EXIT_FAILED


def run_remove(args: argparse.Namespace) -> int:
    from mcpfleet.config.writer import own_config_file, own_config_root, remove_server
    from mcpfleet.errors import ConfigWriteError

    scope: Scope = "project" if args.project else "user"
    root = project_root(args)
    path = own_config_file(scope, root)
    discovery = _discover(args, all_project_entries=True)
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

    known = {entry.name for entry in _discover(args, all_project_entries=True).entries}
    if args.name not in known:
        error_line(f'no server named "{args.name}" was found; `mcpfleet config` lists them')
        return EXIT_USAGE
    try:
        path = set_server_enabled(args.name, enabled, project_root=project_root(args))
    except ConfigWriteError as error:
        return _write_failed(error)
    verb = "enabled" if enabled else "disabled"
    _report(args, {verb: args.name, "path": str(path)}, [f"{verb} {args.name} (recorded in {path})"])
    return EXIT_OK


def run_enable(args: argparse.Namespace) -> int:
    return _toggle(args, True)


def run_disable(args: argparse.Namespace) -> int:
    return _toggle(args, False)
