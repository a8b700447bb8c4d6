"""The ``/mcp`` command of an agent session: list, reload, reconnect, enable, test, …

``MCPCommandController.handle("/mcp list")`` returns the text to show. Bad input gets
one clear line back, never an exception; the controller never exits the process. Every
piece of text from a server or a config file goes into that text through ``safe_text``
(one line each, control characters made visible), so the host can print it as it is.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from mcpfleet.cli.output import log_causes
from mcpfleet.cli.render import look_of
from mcpfleet.contract.text import safe_text
from mcpfleet.errors import MCPFleetError
from mcpfleet.reports.messages import counted

if TYPE_CHECKING:
    from mcpfleet.agent.session import AgentSession
    from mcpfleet.config.model import ServerConfig
    from mcpfleet.config.writer import Scope

STDERR_LINES_SHOWN = 5
"""Lines of a down server's stderr that ``/mcp list`` shows."""

HELP_TEXT = """\
MCP server management
  /mcp list                 every server with its state, tool count, source, last error
  /mcp reload [--full]      apply config changes, keeping unchanged servers running
                            (--full: disconnect everything, then rediscover and reconnect)
  /mcp reconnect NAME       reconnect one server (also lifts a crash suspension)
  /mcp enable NAME          enable a server (persisted) and start it
  /mcp disable NAME         disable a server (persisted) and stop it
  /mcp add NAME [--project] (--url URL [--transport http|sse] | -- COMMAND [ARG…])
                            (and mcpfleet add's --command, --arg, --env, --header)
  /mcp remove NAME [--project]
  /mcp test NAME            connect once, list tools, disconnect
  /mcp resources            resources of every connected server
  /mcp prompts              prompts of every connected server
  /mcp help                 this text"""


class MCPCommandController:
    """Runs ``/mcp`` sub-commands against one session and its manager."""

    def __init__(self, session: AgentSession) -> None:
        self.session = session
        self._commands: dict[str, Callable[[list[str]], Awaitable[str]]] = {
            "help": self._help,
            "list": self._list,
            "reload": self._reload,
            "reconnect": self._reconnect,
            "enable": self._enable,
            "disable": self._disable,
            "add": self._add,
            "remove": self._remove,
            "rm": self._remove,
            "test": self._test,
            "resources": self._resources,
            "prompts": self._prompts,
        }

    async def handle(self, line: str) -> str:
        """Run one ``/mcp …`` line and return what to show."""
        try:
            words = shlex.split(line)
        except ValueError as error:
            return f"Could not parse the command: {error}."
        if words and words[0] in ("/mcp", "mcp"):
            words = words[1:]
        if not words:
            return HELP_TEXT
        command = self._commands.get(words[0])
        if command is None:
            return f"Unknown subcommand: {safe_text(words[0])}. Type /mcp help for usage."
        try:
            return await command(words[1:])
        except _UsageError as error:
            return safe_text(error)
        except MCPFleetError as error:
            log_causes(error)
            return f"/mcp {words[0]} failed: {safe_text(error)}"

    async def _help(self, arguments: list[str]) -> str:
        return HELP_TEXT

    async def _list(self, arguments: list[str]) -> str:
        manager = self.session.mcp_manager
        names = manager.get_all_server_names()
        errors = manager.get_errors()
        discovery = manager.last_discovery
        # Disabled servers never reach the manager; discovery still knows them.
        disabled = {
            entry.name: entry
            for entry in (discovery.entries if discovery is not None else ())
            if entry.state == "disabled" and entry.name not in names
        }
        if not names and not errors and not disabled:
            return "No MCP servers configured."
        counts: dict[str, int] = {}
        for tool in manager.get_tools():
            counts[tool.server_name] = counts.get(tool.server_name, 0) + 1
        lines = []
        for name in sorted(set(names) | set(errors) | set(disabled)):
            if name in disabled:
                entry = disabled[name]
                where = f"[{entry.source.provider_name}, {entry.source.level}]"
                lines.append(f"{look_of('disabled').mark} {safe_text(name)}: disabled {where}")
                continue
            state = manager.get_server_state(name)
            source = manager.get_source(name)
            where = f" [{source.provider_name}, {source.level}]" if source else ""
            crashes = (
                f", {counted(state.recent_crashes, 'recent crash', 'recent crashes')}"
                if state.recent_crashes
                else ""
            )
            mark = look_of(state.state).mark
            tools = counted(counts.get(name, 0), "tool")
            line = f"{mark} {safe_text(name)}: {state.state}, {tools}{crashes}{where}"
            if state.last_error:
                line += f"\n    {safe_text(state.last_error)}"
            if state.state != "connected" and state.stderr_tail:
                line += "\n    stderr (last lines):" + "".join(
                    f"\n      {safe_text(text)}" for text in state.stderr_tail[-STDERR_LINES_SHOWN:]
                )
            lines.append(line)
        return "\n".join(lines)

    async def _reload(self, arguments: list[str]) -> str:
        unknown = [a for a in arguments if a != "--full"]
        if unknown:
            return f"Unknown option: {unknown[0]}. Usage: /mcp reload [--full]"
        started = time.perf_counter()
        result = await self.session.reload_mcp(full="--full" in arguments)
        elapsed = (time.perf_counter() - started) * 1000
        lines = [
            f"MCP reload complete in {elapsed:.0f} ms: {len(result.connected_servers)} connected, "
            f"{counted(len(result.tools), 'tool')}."
        ]
        if result.errors:
            lines.append("Some servers failed to connect:")
            lines += [
                f"  {safe_text(name)}: {safe_text(error)}" for name, error in sorted(result.errors.items())
            ]
        return "\n".join(lines)

    def _one_name(self, arguments: list[str], usage: str) -> str:
        if len(arguments) != 1:
            raise _UsageError(f"Usage: {usage}")
        return arguments[0]

    async def _reconnect(self, arguments: list[str]) -> str:
        name = self._one_name(arguments, "/mcp reconnect NAME")
        manager = self.session.mcp_manager
        await manager.reconnect_server(name)
        await self.session.refresh_mcp_tools(manager.get_tools())
        count = sum(1 for tool in manager.get_tools() if tool.server_name == name)
        return f'Reconnected to "{name}". Tools: {count}'

    async def _enable(self, arguments: list[str]) -> str:
        return await self._set_enabled(arguments, enabled=True)

    async def _disable(self, arguments: list[str]) -> str:
        return await self._set_enabled(arguments, enabled=False)

    async def _set_enabled(self, arguments: list[str], *, enabled: bool) -> str:
        from mcpfleet.config.writer import set_server_enabled

        verb = "enable" if enabled else "disable"
        name = self._one_name(arguments, f"/mcp {verb} NAME")
        manager = self.session.mcp_manager
        set_server_enabled(name, enabled, project_root=manager.cwd)
        await self.session.reload_mcp()
        return f"{name} {verb}d."

    async def _add(self, arguments: list[str]) -> str:
        from mcpfleet.cli.add_server import SHELL_USAGE, AddServerUsageError, add_new_server, parse_shell_add

        try:
            server = parse_shell_add(arguments)
        except AddServerUsageError as error:
            return safe_text(f"{error} {SHELL_USAGE}" if error.show_usage else error)
        manager = self.session.mcp_manager
        path = add_new_server(server, manager.cwd)
        await self.session.reload_mcp()
        status = manager.get_connection_status(server.name)
        return f'+ Added server "{safe_text(server.name)}" to {safe_text(path)} ({status}).'

    async def _remove(self, arguments: list[str]) -> str:
        from mcpfleet.config.writer import own_config_file, own_config_root, remove_server

        project = "--project" in arguments
        names = [a for a in arguments if a != "--project"]
        name = self._one_name(names, "/mcp remove NAME [--project]")
        manager = self.session.mcp_manager
        scope: Scope = "project" if project else "user"
        path = own_config_file(scope, manager.cwd)
        remove_server(path, name, root=own_config_root(scope, manager.cwd))
        await manager.disconnect_server(name)
        await self.session.reload_mcp()
        return f'- Removed server "{name}" from {safe_text(path)}.'

    def _config_of(self, name: str) -> ServerConfig:
        manager = self.session.mcp_manager
        config = manager.get_server_config(name)
        if config is None and manager.last_discovery is not None:
            config = manager.last_discovery.configs.get(name)
        if config is None:
            raise _UsageError(f'No active MCP server named "{name}". /mcp list shows the servers.')
        return config

    async def _test(self, arguments: list[str]) -> str:
        from mcpfleet.client.opening import connect_to_server

        name = self._one_name(arguments, "/mcp test NAME")
        config = self._config_of(name)
        started = time.perf_counter()
        # The roots the session offers its servers (none unless --roots), for this one too.
        roots = self.session.mcp_manager.settings.roots
        async with connect_to_server(name, config, cwd=self.session.cwd, roots=roots) as connection:
            tools = await connection.list_tools()
        elapsed = (time.perf_counter() - started) * 1000
        shown = ", ".join(safe_text(tool.name) for tool in tools[:10]) + (" …" if len(tools) > 10 else "")
        if not tools:
            return f"Connection successful in {elapsed:.0f} ms. No tools reported."
        return f"Connection successful in {elapsed:.0f} ms. {counted(len(tools), 'tool')}: {shown}"

    async def _resources(self, arguments: list[str]) -> str:
        lines = []
        manager = self.session.mcp_manager
        for name in self._connected_offering("resources"):
            for resource in await manager.list_resources(name):
                lines.append(
                    safe_text(f"{name}: {resource.get('uri')}  {resource.get('name') or ''}".rstrip())
                )
        return "\n".join(lines) or "No resources on the connected servers."

    async def _prompts(self, arguments: list[str]) -> str:
        lines = []
        manager = self.session.mcp_manager
        for name in self._connected_offering("prompts"):
            for prompt in await manager.list_prompts(name):
                parameters = " ".join(
                    f"{a.get('name')}={'*' if a.get('required') else ''}"
                    for a in prompt.get("arguments") or []
                )
                lines.append(safe_text(f"/{name}:{prompt.get('name')} {parameters}".rstrip()))
        return "\n".join(lines) or "No prompts on the connected servers."

    def _connected_offering(self, capability: str) -> list[str]:
        """The connected servers that declared ``capability``, in the order the manager lists them."""
        servers = self.session.mcp_manager.servers
        return [
            name
            for name in self.session.mcp_manager.get_connected_servers()
            if name in servers and capability in servers[name].capabilities
        ]


class _UsageError(MCPFleetError):
    """Bad arguments to a sub-command; its message is the usage line."""
