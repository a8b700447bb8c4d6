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
from typing import TYPE_CHECKING, Any

from mcpfleet.cli.main import strict_option
from mcpfleet.cli.options import FleetOptions
from mcpfleet.cli.output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, emit_json, error_line, output_line
from mcpfleet.cli.through_daemon import CommandFailed, ask_daemon

if TYPE_CHECKING:
    from mcpfleet.cli.render import ServerRow
    from mcpfleet.config.model import DiscoveryResult
    from mcpfleet.fleet.manager import MCPLoadResult, MCPManager


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    status = subparsers.add_parser("status", help="connect every server like an agent would and report")
    strict_option(status, "exit 1 when any server failed")
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
    strict_option(tools, "exit 1 when any server failed")
    tools.set_defaults(handler=tools_command)

    call = subparsers.add_parser("call", help="call one tool and print its result")
    call.add_argument("tool", help="tool name: mcp_<server>_<tool>, <server>/<tool> or mcp__<server>__<tool>")
    call.add_argument("arguments", nargs="?", default="{}", help="JSON object of arguments (default {})")
    call.set_defaults(handler=call_command)

    shell = subparsers.add_parser("shell", help="interactive session: /mcp …, /tools, /call, /exit")
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
    args: argparse.Namespace, manager: MCPManager, discovery: DiscoveryResult, *, settle: bool = False
) -> MCPLoadResult:
    """The gated connect round, with live per-server progress on a terminal.

    ``settle`` then waits for every server the gate let through unfinished, so a report
    gives each server's final state rather than the cache's picture of it.
    """
    from mcpfleet.cli.progress import live_progress

    with live_progress(manager, enabled=not args.json and sys.stderr.isatty()):
        result = await manager.connect_servers(discovery.configs, discovery.sources)
        if settle:
            await _settle(manager, result)
    return result


async def _settle(manager: MCPManager, result: MCPLoadResult) -> None:
    """Wait, in parallel, for each server still starting after the gate, each within its own bound.

    A server that does not come up in time gets that as its error in ``result``.
    """
    import anyio

    from mcpfleet.errors import Failure, MCPFleetError

    async def settle_one(name: str) -> None:
        try:
            await manager.wait_for_connection(name)
        except MCPFleetError as error:
            result.add_failure(Failure(name, "connect", str(error)))

    async with anyio.create_task_group() as waiters:
        for name in [*result.deferred_servers, *result.late_servers]:
            waiters.start_soon(settle_one, name)


def _at_gate(name: str, result: MCPLoadResult) -> str:
    """How the start-up gate served one started server: ready in time, from the cache, or waited for."""
    if name in result.deferred_servers or name in result.late_servers:
        return "deferred"
    if name in result.waited_servers:
        return "waited"
    return "live"


def server_rows(discovery: DiscoveryResult, manager: MCPManager, result: MCPLoadResult) -> list[ServerRow]:
    """One row per server an agent would try to run, with its state after the gate."""
    from mcpfleet.cli.render import ServerRow

    rows: list[ServerRow] = []
    tool_counts: dict[str, int] = {}
    for tool in manager.get_tools():
        tool_counts[tool.server_name] = tool_counts.get(tool.server_name, 0) + 1
    for entry in discovery.entries:
        if entry.state in ("shadowed", "filtered"):
            continue
        error: str | None = None
        status: str
        state: str
        stderr_tail: tuple[str, ...] = ()
        at_gate: str | None = None
        if entry.state == "active":
            at_gate = _at_gate(entry.name, result)
            health = manager.get_server_state(entry.name)
            error = result.errors.get(entry.name) or health.last_error
            status = "failed" if error else manager.get_connection_status(entry.name)
            # ``status`` keeps the documented set; ``state`` adds reconnecting and suspended.
            state = health.state if health.state in ("reconnecting", "suspended") else status
            if state != "connected":
                stderr_tail = tuple(health.stderr_tail)
        elif entry.state == "invalid":
            status, error = "failed", entry.reason
            state = status
        elif entry.state == "disabled":
            # Switched off on purpose: the status says so, and there is no error to report.
            status = state = "disabled"
        else:
            status, error = entry.state, entry.reason
            state = status
        era, protocol_version = _protocol_of(manager, entry.name)
        rows.append(
            ServerRow(
                name=entry.name,
                status=status,
                state=state,
                tools=tool_counts.get(entry.name, 0),
                deferred=manager.is_deferred(entry.name),
                at_gate=at_gate,
                error=error,
                stderr_tail=stderr_tail,
                source=entry.source,
                timings_ms={k: round(v, 1) for k, v in manager.get_timings(entry.name).items()},
                era=era,
                protocol_version=protocol_version,
            )
        )
    return rows


def _protocol_of(manager: MCPManager, name: str) -> tuple[str | None, str | None]:
    """The era (``legacy`` / ``modern``) and protocol version a connected server speaks."""
    connection = manager.get_connection(name)
    if connection is None or not connection.protocol_version:
        return None, None
    return connection.era, connection.protocol_version


def status_command(args: argparse.Namespace) -> int:
    try:
        document = ask_daemon(args, "fleet_status", {})
    except CommandFailed as failure:
        error_line(failure.message)
        return failure.exit_code
    if document is None:
        document = _in_process(status_document, args)
    if args.json:
        emit_json(document)
    else:
        from mcpfleet.cli.render import print_status

        print_status(document)
    failed = any(server.get("status") == "failed" for server in document.get("servers", []))
    return EXIT_FAILED if args.strict and failed else EXIT_OK


async def status_document(args: argparse.Namespace) -> dict[str, Any]:
    """The ``status --json`` document of the fleet, started in this process."""
    from mcpfleet.cli.render import ErrorRow

    manager = FleetOptions.from_args(args).manager()
    # Discovery first, outside the manager's task group: a bad --config file is a usage
    # error to report as such, not a failure inside a running fleet.
    discovery = manager.discover()
    async with manager:
        result = await _connect_with_progress(args, manager, discovery, settle=True)
        rows = server_rows(discovery, manager, result)
    errors = [ErrorRow.of(error) for error in discovery.errors]
    return {"servers": [row.to_json() for row in rows], "errors": [e.to_json() for e in errors]}


def tools_command(args: argparse.Namespace) -> int:
    if args.profile is not None or args.search is not None:
        from mcpfleet.cli.served_tools import served_tools_command

        result: int = _in_process(served_tools_command, args, _connect_with_progress)
        return result
    try:
        document = ask_daemon(args, "tools", {} if args.server is None else {"server": args.server})
    except CommandFailed as failure:
        error_line(failure.message)
        return failure.exit_code
    if document is None:
        document = _in_process(tools_document, args)
    if args.json:
        emit_json(document)
    else:
        from mcpfleet.cli.render import print_tools

        print_tools(document)
    # --strict counts servers that failed (their rows read mcp:<name>), not unreadable files.
    failed = any(str(error.get("path", "")).startswith("mcp:") for error in document.get("errors", []))
    return EXIT_FAILED if args.strict and failed else EXIT_OK


async def tools_document(args: argparse.Namespace) -> dict[str, Any]:
    """The ``tools --json`` document of the fleet, started in this process."""
    from mcpfleet.cli.render import ErrorRow, ToolRow

    manager = FleetOptions.from_args(args).manager()
    discovery = manager.discover()
    async with manager:
        result = await _connect_with_progress(args, manager, discovery)
        tools = [
            ToolRow(
                name=tool.name,
                server=tool.server_name,
                mcp_name=tool.mcp_tool_name,
                description=tool.description,
                deferred=tool.deferred,
                input_schema=tool.parameters,
            )
            for tool in manager.get_tools()
            if args.server is None or tool.server_name == args.server
        ]
    errors = [ErrorRow.of(failure) for failure in [*discovery.errors, *result.failures]]
    return {"tools": [tool.to_json() for tool in tools], "errors": [e.to_json() for e in errors]}


def parse_arguments(text: str) -> dict[str, Any] | None:
    """Parse a JSON object of tool arguments; ``None`` (after one error line) when it is not one."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        error_line(f"arguments are not valid JSON ({error.msg} at column {error.colno}): pass a JSON object")
        return None
    if not isinstance(value, dict):
        error_line('arguments must be a JSON object, e.g. \'{"path": "README.md"}\'')
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
    """The ``call --json`` document of one call, on the fleet started in this process."""
    async with FleetOptions.from_args(args).open_session() as session:
        tool = session.get_tool(args.tool)
        if tool is None:
            known = ", ".join(t.name for t in session.tools) or "none"
            raise CommandFailed(f"no tool named {args.tool!r} (available: {known})", EXIT_FAILED)
        result = await tool.execute(arguments)
    return {
        "is_error": result.is_error,
        "text": result.text,
        "content": result.content,
        "structured": result.structured,
    }


async def shell_command(args: argparse.Namespace) -> int:
    from mcpfleet.cli.shell import run_shell

    return await run_shell(args)


async def demo_command(args: argparse.Namespace) -> int:
    from mcpfleet.cli.demo import run_demo

    return await run_demo(args)
