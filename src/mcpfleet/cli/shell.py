"""``mcpfleet shell``: an agent session driven by typed (or piped) commands.

Reads one command a line from stdin, so it works at a terminal and in scripts:
``/mcp …`` sub-commands, ``/tools``, ``/call TOOL JSON``, ``/help``, ``/exit``. The
discovered config files are watched: an edit is applied (reload by diff) within a second.
Ctrl-C at the prompt (or during a call) closes every server and exits 130.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from typing import TYPE_CHECKING

import anyio

from mcpfleet.cli.output import EXIT_OK, emit_json, error_line, output_line
from mcpfleet.reports.messages import counted

if TYPE_CHECKING:
    from mcpfleet.agent.session import AgentSession
    from mcpfleet.fleet.tools import ToolResult

SHELL_HELP = """\
/tools                list the active tools
/call TOOL [JSON]     call a tool with a JSON object of arguments
/mcp …                manage servers (/mcp help)
/exit                 shut everything down and leave"""

READ_CHUNK_BYTES = 65536


class InputLines:
    """The lines of a file descriptor, read on the event loop.

    A blocking ``readline`` in a worker thread cannot be interrupted: Ctrl-C cancelled the
    session, but the interpreter then waited for that thread (that is, for Enter) before
    it could exit. Waiting for the descriptor to become readable is an ordinary
    cancellable await, and the read that follows returns at once with what is there.
    """

    def __init__(self, descriptor: int) -> None:
        self._descriptor = descriptor
        self._buffer = bytearray()
        self._at_end = False
        # A regular file cannot be watched (epoll refuses it) and never makes a read wait.
        self._always_readable = stat.S_ISREG(os.fstat(descriptor).st_mode)

    async def readline(self) -> str | None:
        """The next line with its newline, the unterminated last line, or ``None`` at the end."""
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0 or (self._at_end and self._buffer):
                size = newline + 1 if newline >= 0 else len(self._buffer)
                line = bytes(self._buffer[:size])
                del self._buffer[:size]
                return line.decode("utf-8", errors="replace")
            if self._at_end:
                return None
            await self._wait_readable()
            chunk = os.read(self._descriptor, READ_CHUNK_BYTES)
            if chunk:
                self._buffer += chunk
            else:
                self._at_end = True

    async def _wait_readable(self) -> None:
        if self._always_readable:
            return
        try:
            await anyio.wait_readable(self._descriptor)
        except PermissionError:
            # Not pollable either (``/dev/null``): such a descriptor never blocks a read.
            self._always_readable = True


async def run_shell(args: argparse.Namespace) -> int:
    from mcpfleet.cli.options import FleetOptions

    interactive = sys.stdin.isatty()
    out = ShellOutput(as_json=args.json)
    # An interactive session lives long enough for config edits to matter: follow them.
    async with FleetOptions.from_args(args).open_session(watch=True) as session:
        for error in session.mcp_errors:
            out.error(f"{error.path}: {error.error}")
        out.banner(session)
        try:
            await _read_commands(out, session, InputLines(sys.stdin.fileno()), interactive=interactive)
        except anyio.get_cancelled_exc_class():
            if interactive:
                sys.stdout.write("\n")  # leave the user's own prompt on a line of its own
                sys.stdout.flush()
            raise
    return EXIT_OK


async def _read_commands(
    out: ShellOutput, session: AgentSession, lines: InputLines, *, interactive: bool
) -> None:
    from mcpfleet.cli.fleet_commands import parse_arguments
    from mcpfleet.cli.slash import MCPCommandController

    controller = MCPCommandController(session)
    while True:
        if interactive:
            sys.stdout.write("mcpfleet> ")
            sys.stdout.flush()
        line = await lines.readline()
        if line is None:
            return
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line in ("/exit", "/quit"):
            return
        if line == "/help":
            out.text(SHELL_HELP)
        elif line == "/tools":
            out.tools(session)
        elif line.startswith("/call"):
            parts = line.split(maxsplit=2)
            if len(parts) < 2:
                out.error("usage: /call TOOL [JSON_ARGS]")
                continue
            arguments = parse_arguments(parts[2] if len(parts) > 2 else "{}", out.error)
            if arguments is None:
                continue
            target = session.get_tool(parts[1])
            if target is None:
                out.error(f"no tool named {parts[1]!r}; /tools lists them")
                continue
            out.result(await target.execute(arguments))
        elif line.startswith("/mcp"):
            out.text(await controller.handle(line))
        else:
            out.error(f"unknown command {line.split()[0]!r}; /help lists the commands")


class ShellOutput:
    """What the shell shows: text on a terminal; under ``--json``, one JSON document a line
    (JSON Lines) for each answer, an error included (``{"error": …}``, said on stderr too)."""

    def __init__(self, *, as_json: bool) -> None:
        self.as_json = as_json

    def banner(self, session: AgentSession) -> None:
        manager = session.mcp_manager
        tools = session.tools
        # Deferred tools come from the cache: their servers count, connected or not yet.
        servers = {getattr(tool, "server_name", None) for tool in tools} - {None}
        connected = len(manager.get_connected_servers()) if manager is not None else 0
        if self.as_json:
            emit_json({"tools": len(tools), "servers": len(servers), "connected": connected}, one_line=True)
            return
        say(
            f"{counted(len(tools), 'tool')} from {counted(len(servers), 'server')} "
            f"({connected} connected). /help lists the commands."
        )

    def text(self, text: str) -> None:
        if self.as_json:
            emit_json({"text": text}, one_line=True)
        else:
            say(text)

    def tools(self, session: AgentSession) -> None:
        rows = [
            {
                "name": tool.name,
                "server": getattr(tool, "server_name", None),
                "description": tool.description,
                "deferred": bool(getattr(tool, "deferred", False)),
            }
            for tool in session.tools
        ]
        if self.as_json:
            emit_json({"tools": rows}, one_line=True)
            return
        for row in rows:
            marker = " (deferred)" if row["deferred"] else ""
            description = str(row["description"] or "")
            summary = description.splitlines()[0] if description else ""
            say(f"{row['name']}{marker}  {summary}")

    def result(self, result: ToolResult) -> None:
        if self.as_json:
            from mcpfleet.reports.tools import call_document

            emit_json(call_document(result), one_line=True)
        else:
            say(("error: " if result.is_error else "") + result.text)

    def error(self, message: str) -> None:
        error_line(message)
        if self.as_json:
            emit_json({"error": message}, one_line=True)


def say(text: str) -> None:
    output_line(text, multiline=True)
