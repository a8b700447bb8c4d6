"""Commands that connect the fleet: ``status``, ``tools``, ``call``, ``shell``, ``demo``.

Each one starts the fleet the way an agent session would (discovery, parallel connect,
the start-up gate), reports, and shuts every server down before it exits. ``status``,
``tools`` and ``call`` first ask the user's daemon when one runs (``cli.through_daemon``):
it holds that fleet already. Either way one document is built, ``--json`` prints it and the
text report is drawn from it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Awaitable, Callable, Collection
from typing import TYPE_CHECKING, Any

from mcpfleet.cli.main import strict_option
from mcpfleet.cli.options import FleetOptions, roots_option
from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, error_line, output_line
from mcpfleet.cli.through_daemon import CommandFailed, ask_daemon

if TYPE_CHECKING:
    from mcpfleet.config.model import DiscoveryResult
    from mcpfleet.fleet.manager import MCPLoadResult, MCPManager


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = subparsers.add_parser("status", help="connect every server like an agent would and report")
    strict_option(status, "exit 1 when any server failed")
    roots_option(status)
    status.set_defaults(handler=status_command)

    tools = subparsers.add_parser("tools", help="the tools an agent would see")
    tools.add_argument("--server", help="only this server's tools")
    tools.add_argument(
        "--profile",
        metavar="NAME",
        help="what `serve --profile NAME` serves: the profile's servers and tools, under their served names",
    )
    tools.add_argument(
        "--search",
        metavar="QUERY",
        help="rank the tools for QUERY as the gateway's find_tools does, best first",
    )
    tools.add_argument(
        "--limit", type=int, default=8, metavar="N", help="with --search: how many tools at most (default 8)"
    )
    tools.add_argument(
        "--live",
        action="store_true",
        help="wait for every server to connect and list its tools, instead of answering from the "
        "tool cache for the servers not ready within --startup-timeout",
    )
    tools.add_argument(
        "action",
        nargs="?",
        choices=("review", "approve"),
        help="review: the withheld tool changes with their diff and warnings; approve: accept them",
    )
    tools.add_argument("names", nargs="*", metavar="SERVER [TOOL ...]", help="for review or approve")
    strict_option(tools, "exit 1 when any server failed")
    roots_option(tools)
    tools.set_defaults(handler=tools_command)

    call = subparsers.add_parser("call", help="call one tool and print its result")
    call.add_argument("tool", help="tool name: mcp_<server>_<tool>, <server>/<tool> or mcp__<server>__<tool>")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments (default {})")
    roots_option(call)
    call.set_defaults(handler=call_command)

    shell = subparsers.add_parser("shell", help="interactive session: /mcp …, /tools, /call, /exit")
    roots_option(shell)
    shell.set_defaults(handler=_run_async(shell_command))

    demo = subparsers.add_parser("demo", help="the whole lifecycle on bundled example servers")
    demo.set_defaults(handler=_run_async(demo_command))


def _run_async(command: Any) -> Any:
    def handler(args: argparse.Namespace) -> int:
        result: int = _in_process(command, args)
        return result

    return handler


def _in_process(command: Any, *args: Any) -> Any:
    import anyio

    return anyio.run(command, *args)


async def _connect_with_progress(
    args: argparse.Namespace,
    manager: MCPManager,
    discovery: DiscoveryResult,
    *,
    settle: bool = False,
    only: Collection[str] | None = None,
) -> MCPLoadResult:
    """The gated connect round, with live per-server progress on a terminal.

    ``settle`` then waits for every server the gate let through unfinished, so a report
    gives each server's final state rather than the cache's picture of it. ``only`` starts
    those servers and no other (``tools --server``, ``call``).
    """
    from mcpfleet.cli.progress import live_progress
    from mcpfleet.reports import status as status_report

    configs = {name: config for name, config in discovery.configs.items() if only is None or name in only}
    with live_progress(manager, enabled=not args.json and sys.stderr.isatty()):
        result = await manager.connect_servers(configs, discovery.sources)
        if settle:
            await status_report.settle(manager, result)
    return result


def status_command(args: argparse.Namespace) -> int:
    document = _report_document(args, "fleet_status", {}, status_document)
    if isinstance(document, int):
        return document
    if args.json:
        emit_json(document)
    else:
        from mcpfleet.cli.render import print_status

        print_status(document)
    failed = any(server.get("status") == "failed" for server in document.get("servers", []))
    return EXIT_FAILED if args.strict and failed else EXIT_OK


def _report_document(
    args: argparse.Namespace,
    op: str,
    params: dict[str, Any],
    build_in_process: Callable[[argparse.Namespace], Awaitable[dict[str, Any]]],
) -> dict[str, Any] | int:
    """The report's document from a running daemon, else built in this process; or the exit
    code (the reason said on stderr) when the daemon failed in a way not to be retried here."""
    try:
        document = ask_daemon(args, op, params)
        if document is None:
            document = _in_process(build_in_process, args)
    except CommandFailed as failure:
        error_line(failure.message)
        return failure.exit_code
    return document


async def status_document(args: argparse.Namespace) -> dict[str, Any]:
    """The ``status --json`` document of the fleet, started in this process."""
    from mcpfleet.reports import status as status_report

    manager = FleetOptions.from_args(args).manager()
    # Discovery first, outside the manager's task group: a bad --config file is a usage
    # error to report as such, not a failure inside a running fleet.
    discovery = manager.discover()
    async with manager:
        result = await _connect_with_progress(args, manager, discovery, settle=True)
        rows = status_report.server_rows(discovery, manager, result)
    return status_report.status_document(rows, status_report.error_rows(discovery.errors))


def tools_command(args: argparse.Namespace) -> int:
    if args.action is not None:
        from mcpfleet.cli.pin_commands import pin_command

        return pin_command(args)
    if args.names:
        error_line(f"unexpected {args.names[0]!r}: `mcpfleet tools review|approve` take server names")
        return EXIT_USAGE
    if args.profile is not None or args.search is not None:
        from mcpfleet.cli.served_tools import served_tools_command

        result: int = _in_process(served_tools_command, args, _connect_with_progress)
        return result
    params = {} if args.server is None else {"server": args.server}
    document = _report_document(args, "tools", params, tools_document)
    if isinstance(document, int):
        return document
    if args.json:
        emit_json(document)
    else:
        from mcpfleet.cli.render import print_tools

        print_tools(document)
    # --strict counts servers that failed (their rows read mcp:<name>), not unreadable files.
    failed = any(str(error.get("path", "")).startswith("mcp:") for error in document.get("errors", []))
    return EXIT_FAILED if args.strict and failed else EXIT_OK


async def tools_document(args: argparse.Namespace) -> dict[str, Any]:
    """The ``tools --json`` document of the fleet, started in this process: as the start-up
    gate answers (``--live``: once every server settled); ``--server`` starts that one only."""
    from mcpfleet.reports import status as status_report
    from mcpfleet.reports import tools as tool_report

    manager = FleetOptions.from_args(args).manager()
    discovery = manager.discover()
    only = None if args.server is None else {known_server(args.server, discovery, EXIT_USAGE)}
    async with manager:
        result = await _connect_with_progress(args, manager, discovery, settle=args.live, only=only)
        tools = tool_report.tool_rows(
            manager.get_tools(), server=args.server, withheld=manager.withheld_tools()
        )
    if only is not None:
        # The one server asked for, when it cannot start, says why (approval, invalid entry).
        result.complete_from(discovery)
    failures = [failure for failure in result.failures if only is None or failure.subject in only]
    return tool_report.tools_document(tools, status_report.error_rows([*discovery.errors, *failures]))


def known_server(name: str, discovery: DiscoveryResult, exit_code: int) -> str:
    """``name``, when a config file declares a server by that name; else ``CommandFailed``
    at once, with the names it may have meant."""
    from mcpfleet.reports import messages

    declared = [entry.name for entry in discovery.entries]
    if name not in declared:
        raise CommandFailed(messages.unknown_server_message(name, declared), exit_code)
    return name


def _why_not_started(name: str, discovery: DiscoveryResult) -> str:
    """Why the declared server ``name`` does not start here, and what to do about it."""
    from mcpfleet.fleet.startup import StartupReport

    inactive = StartupReport()
    inactive.complete_from(discovery)
    if name in inactive.disabled_servers:
        return f"server {name!r} is disabled: `mcpfleet enable {name}` turns it on"
    if name in inactive.errors:
        return inactive.errors[name]
    states = sorted({entry.state for entry in discovery.entries if entry.name == name})
    return f"server {name!r} does not start here ({', '.join(states)}): `mcpfleet config` says why"


def parse_arguments(text: str, report: Callable[[str], None] = error_line) -> dict[str, Any] | None:
    """Parse a JSON object of tool arguments; ``None`` (after one error, said by ``report``)
    when it is not one."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        report(f"arguments are not valid JSON ({error.msg} at column {error.colno}): pass a JSON object")
        return None
    if not isinstance(value, dict):
        report('arguments must be a JSON object, e.g. \'{"path": "README.md"}\'')
        return None
    return value


def call_command(args: argparse.Namespace) -> int:
    arguments = parse_arguments(args.arguments)
    if arguments is None:
        return EXIT_USAGE
    try:
        document = ask_daemon(args, "call", {"tool": args.tool, "arguments": arguments}, repeatable=False)
        if document is None:
            document = _in_process(call_document, args, arguments)
    except CommandFailed as failure:
        error_line(failure.message)
        return failure.exit_code
    if args.json:
        emit_json(document)
    else:
        is_error = bool(document.get("is_error"))
        output_line(
            str(document.get("text", "")), multiline=True, stream=sys.stderr if is_error else sys.stdout
        )
    return EXIT_FAILED if document.get("is_error") else EXIT_OK


async def call_document(args: argparse.Namespace, arguments: dict[str, Any]) -> dict[str, Any]:
    """The ``call --json`` document of one call, in this process: only the server the tool's
    name spells out is started (every server, for a bare tool name), behind the start-up
    gate, so a tool the cache does not know of that server fails without waiting for it."""
    from mcpfleet.fleet.pinning import withheld_named
    from mcpfleet.fleet.tools import resolve_tool_name, servers_named_by
    from mcpfleet.reports import messages
    from mcpfleet.reports import tools as tool_report

    manager = FleetOptions.from_args(args).manager()
    discovery = manager.discover()
    declared = [entry.name for entry in discovery.entries]
    named = servers_named_by(args.tool, declared)
    written, servers = named.written, named.servers
    if written is not None and not servers:
        raise CommandFailed(messages.unknown_server_message(written, declared), EXIT_FAILED)
    if servers and not any(name in discovery.configs for name in servers):
        raise CommandFailed(_why_not_started(servers[0], discovery), EXIT_FAILED)
    async with manager:
        result = await _connect_with_progress(args, manager, discovery, only=servers if written else None)
        tools = manager.get_tools()
        tool = resolve_tool_name(args.tool, tools)
        outcome = await tool.execute(arguments) if tool is not None else None
        withheld = withheld_named(args.tool, manager.withheld_tools()) if tool is None else None
    if withheld is not None:
        return tool_report.withheld_call_document(withheld)
    # Raised here, not in the manager's block, whose task group would wrap it in a group.
    if outcome is None:
        # A server that could not start says why, rather than that it has no such tool.
        failed = [failure.message for failure in result.failures if failure.subject in servers]
        raise CommandFailed(
            failed[0] if failed else messages.no_such_tool_message(args.tool, tools, declared), EXIT_FAILED
        )
    return tool_report.call_document(outcome)


async def shell_command(args: argparse.Namespace) -> int:
    from mcpfleet.cli.shell import run_shell

    return await run_shell(args)


async def demo_command(args: argparse.Namespace) -> int:
    from mcpfleet.cli.demo import run_demo

    return await run_demo(args)
