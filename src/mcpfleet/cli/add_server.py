"""Adding a server to mcpfleet's own config, for ``mcpfleet add`` and the shell's ``/mcp add``.

Both read the same options (``add_server_arguments``), check them the same way and write
the same entry (``NewServer``, ``add_new_server``). The shell also takes the command
after ``--`` (``/mcp add NAME -- npx -y pkg``), since it splits the line itself.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from mcpfleet.errors import MCPFleetError

if TYPE_CHECKING:
    from mcpfleet.config.writer import Scope

TRANSPORTS = ("http", "sse")
SHELL_USAGE = "Usage: /mcp add NAME [--project] (--url URL [--transport http|sse] | -- COMMAND [ARG…])"


class AddServerUsageError(MCPFleetError):
    """The options do not describe one server; the message says what to change."""

    def __init__(self, message: str, *, show_usage: bool = True) -> None:
        super().__init__(message)
        self.show_usage = show_usage
        """Whether the usage line helps: not when one value is wrong and the message names it."""


def key_value(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that describe a new server."""
    parser.add_argument("name", metavar="NAME")
    # ``dest`` differs from the option: ``args.command`` is the sub-command's name.
    parser.add_argument("--command", dest="server_command", help="executable of a stdio server")
    parser.add_argument("--url", help="URL of an HTTP or SSE server")
    parser.add_argument(
        "--arg",
        dest="args",
        action="append",
        default=[],
        metavar="ARG",
        help="repeatable; --arg=-x for dash values",
    )
    parser.add_argument(
        "--env", action="append", default=[], type=key_value, metavar="K=V", help="repeatable"
    )
    parser.add_argument(
        "--header", action="append", default=[], type=key_value, metavar="K=V", help="repeatable"
    )
    parser.add_argument("--transport", default="http", metavar="{http,sse}", help="for --url (default http)")
    parser.add_argument(
        "--project", action="store_true", help="write the project file instead of the user file"
    )


@dataclass(frozen=True)
class NewServer:
    """A server to add: its name, its config entry, and which of mcpfleet's files gets it."""

    name: str
    entry: dict[str, Any] = field(hash=False)
    project: bool = False

    @property
    def scope(self) -> Scope:
        return "project" if self.project else "user"

    @classmethod
    def from_arguments(cls, arguments: argparse.Namespace, command_line: Sequence[str] = ()) -> NewServer:
        """The server ``add_server_arguments`` parsed; ``command_line`` is what followed ``--``."""
        if arguments.transport not in TRANSPORTS:
            raise AddServerUsageError("Invalid --transport value. Use http or sse.", show_usage=False)
        command = list(command_line)
        if arguments.server_command is not None:
            command = [arguments.server_command, *arguments.args] if not command else []
        if bool(arguments.url) == bool(command):
            raise AddServerUsageError("Use either --url or a command, exactly one.")
        entry: dict[str, Any]
        if arguments.url:
            entry = {"type": arguments.transport, "url": arguments.url}
            if arguments.header:
                entry["headers"] = dict(arguments.header)
        else:
            entry = {"command": command[0]}
            if command[1:]:
                entry["args"] = command[1:]
            if arguments.env:
                entry["env"] = dict(arguments.env)
        return cls(arguments.name, entry, bool(arguments.project))


class _ShellParser(argparse.ArgumentParser):
    """An argument parser that reports a mistake instead of exiting the process."""

    def error(self, message: str) -> NoReturn:
        raise AddServerUsageError(f"{message[:1].upper()}{message[1:]}.")


def parse_shell_add(words: Sequence[str]) -> NewServer:
    """``/mcp add``'s words (after ``add``): the options of ``mcpfleet add``, then ``-- COMMAND…``."""
    words = list(words)
    command_line: list[str] = []
    if "--" in words:
        split = words.index("--")
        words, command_line = words[:split], words[split + 1 :]
    if not words or words[0].startswith("-"):
        raise AddServerUsageError("Server name required.")
    parser = _ShellParser(prog="/mcp add", add_help=False, allow_abbrev=False)
    add_server_arguments(parser)
    return NewServer.from_arguments(parser.parse_args(words), command_line)


def add_new_server(server: NewServer, project_root: Path) -> Path:
    """Write ``server`` into mcpfleet's own file for its scope; returns that file.

    A project entry is approved at once: the user just typed it, so it needs no separate
    review (an entry a repository brings is still approved only by ``mcpfleet approve``).
    """
    from mcpfleet.config.writer import add_server, own_config_file, own_config_root

    path = own_config_file(server.scope, project_root)
    add_server(path, server.name, server.entry, root=own_config_root(server.scope, project_root))
    if server.project:
        _approve_own_entry(server.name, path, project_root)
    return path


def _approve_own_entry(name: str, path: Path, project_root: Path) -> None:
    from mcpfleet.config import ApprovalStore, load_all_mcp_configs

    store = ApprovalStore()
    for entry in load_all_mcp_configs(project_root).entries:
        if entry.name == name and entry.source.path == str(path) and entry.config is not None:
            store.approve(entry)
