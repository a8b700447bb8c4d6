"""``mcpfleet shell``: an agent session driven by typed (or piped) commands.

Reads one command a line from stdin, so it works at a terminal and in scripts:
``/mcp …`` sub-commands, ``/tools``, ``/call TOOL JSON``, ``/help``, ``/exit``. The
discovered config files are watched: an edit is applied (reload by diff) within a second.
"""

from __future__ import annotations

import argparse
import json
import sys

import anyio
import anyio.to_thread

from mcpfleet.cli.output import EXIT_OK, error_line

SHELL_HELP = """\
/tools                list the active tools
/call TOOL [JSON]     call a tool with a JSON object of arguments
/mcp …                manage servers (/mcp help)
/exit                 shut everything down and leave"""


async def run_shell(args: argparse.Namespace) -> int:
    from mcpfleet.cli.fleet_commands import open_session, parse_arguments
    from mcpfleet.commands import MCPCommandController

    interactive = sys.stdin.isatty()
    # An interactive session lives long enough for config edits to matter: follow them.
    session = await open_session(args, watch=True)
    async with session:
        controller = MCPCommandController(session)
        for error in session.mcp_errors:
            error_line(f"{error.path}: {error.error}")
        connected = len(session.mcp_manager.get_connected_servers())
        say(f"{len(session.tools)} tools from {connected} servers. /help lists the commands.")
        while True:
            if interactive:
                sys.stdout.write("mcpfleet> ")
                sys.stdout.flush()
            line = await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
            if not line:
                break
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line in ("/exit", "/quit"):
                break
            if line == "/help":
                say(SHELL_HELP)
            elif line == "/tools":
                for tool in session.tools:
                    marker = " (deferred)" if getattr(tool, "deferred", False) else ""
                    say(
                        f"{tool.name}{marker}  {tool.description.splitlines()[0] if tool.description else ''}"
                    )
            elif line.startswith("/call"):
                parts = line.split(maxsplit=2)
                if len(parts) < 2:
                    error_line("usage: /call TOOL [JSON_ARGS]")
                    continue
                arguments = parse_arguments(parts[2] if len(parts) > 2 else "{}")
                if arguments is None:
                    continue
                target = session.get_tool(parts[1])
                if target is None:
                    error_line(f"no tool named {parts[1]!r}; /tools lists them")
                    continue
                result = await target.execute(arguments)
                if args.json:
                    say(json.dumps({"is_error": result.is_error, "text": result.text}))
                else:
                    say(("error: " if result.is_error else "") + result.text)
            elif line.startswith("/mcp"):
                say(await controller.handle(line))
            else:
                error_line(f"unknown command {line.split()[0]!r}; /help lists the commands")
    return EXIT_OK


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
