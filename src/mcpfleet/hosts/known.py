"""The MCP hosts ``mcpfleet hosts`` knows: where each keeps its user config and how its
gateway entry is written.

The file of each host is the user-level file discovery reads for it (``config/providers.py``),
so the two can never disagree about where a host's servers are.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mcpfleet.config.gateway_entry import MOVED_SERVERS_KEY, REPLACED_KEY
from mcpfleet.config.normalise import Adapter
from mcpfleet.config.providers import PROJECT_KEY, PROVIDERS, Locations, Provider

DocumentFormat = Literal["json", "toml"]
EntryShape = Literal["typed", "typed-with-env", "plain"]

GATEWAY_ENTRY_NAME = "mcpfleet"
"""The name ``hosts install`` gives the gateway's entry in a host's config."""
SERVE_ARGS = ("serve",)


@dataclass(frozen=True)
class HostKind:
    """What differs from one host to the next, beyond the file discovery already knows."""

    id: str
    shape: EntryShape
    """``typed``: ``"type": "stdio"`` beside the command, as Cursor and VS Code document it;
    ``typed-with-env``: also ``"env": {}``, as ``claude mcp add`` writes it; ``plain``:
    command and args only (Claude Desktop, Windsurf, Gemini CLI, Zed, Codex)."""


KINDS: tuple[HostKind, ...] = (
    HostKind("claude-code", "typed-with-env"),
    HostKind("cursor", "typed"),
    HostKind("vscode", "typed"),
    HostKind("codex", "plain"),
    HostKind("gemini", "plain"),
    HostKind("claude-desktop", "plain"),
    HostKind("windsurf", "plain"),
    HostKind("zed", "plain"),
)
HOST_IDS: tuple[str, ...] = tuple(kind.id for kind in KINDS)


@dataclass(frozen=True)
class ScopeFile:
    """Another file where the host reads servers for this project (Claude Code's local scope
    in ``~/.claude.json``, a project's ``.mcp.json`` or ``.cursor/mcp.json``): an entry there
    that runs the gateway wires the host too. ``hosts install`` writes only the user file."""

    level: str
    path: Path
    servers_at: tuple[str, ...]
    """The key path of its server map, the project's folder already in it."""
    adapt: Adapter


@dataclass(frozen=True)
class Host:
    """One MCP host on this machine (installed or not)."""

    id: str
    name: str
    path: Path
    """Its user config file."""
    servers_key: str
    """The top-level key (JSON) or table (TOML) of its server map."""
    adapt: Adapter
    """Discovery's reading of one of its entries (to recognise the gateway's)."""
    format: DocumentFormat
    marker: Path
    """A folder that exists once the host has run here (its config folder)."""
    root: Path
    """The folder the file must stay in, links resolved: the home, or the folder a variable
    such as ``CODEX_HOME`` moved it to."""
    shape: EntryShape
    other_scopes: tuple[ScopeFile, ...] = ()

    @property
    def found(self) -> bool:
        return self.path.exists() or self.marker.is_dir()

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(f"{self.path.name}.mcpfleet-backup")

    def gateway_entry(self, command: Sequence[str], serve_options: Sequence[str] = ()) -> dict[str, Any]:
        """The gateway's entry in this host's own format; ``serve_options`` follow ``serve``
        (``--profile NAME``)."""
        program, *arguments = command
        entry: dict[str, Any] = {"type": "stdio"} if self.shape != "plain" else {}
        entry.update(command=program, args=[*arguments, *SERVE_ARGS, *serve_options])
        if self.shape == "typed-with-env":
            entry["env"] = {}
        return entry


def known_hosts(project_root: Path | None = None) -> tuple[Host, ...]:
    """Every host ``mcpfleet hosts`` can wire, in the order it lists them."""
    locations = Locations.current(project_root or Path.cwd())
    providers = {provider.id: provider for provider in PROVIDERS}
    return tuple(_host(providers[kind.id], kind, locations) for kind in KINDS)


def find_host(host_id: str, project_root: Path | None = None) -> Host:
    """The host called ``host_id`` (one of ``HOST_IDS``)."""
    return next(host for host in known_hosts(project_root) if host.id == host_id)


def _host(provider: Provider, kind: HostKind, at: Locations) -> Host:
    spec = next(
        spec
        for spec in provider.files(at)
        if spec.level == "user" and spec.servers_at[0] not in (REPLACED_KEY, MOVED_SERVERS_KEY)
    )
    marker = spec.path.parent
    if kind.id == "claude-code" and not at.environ.get("CLAUDE_CONFIG_DIR"):
        marker = at.home / ".claude"  # ~/.claude.json sits in the home itself
    root = at.home if at.home in spec.path.parents else spec.path.parent
    document_format: DocumentFormat = "toml" if spec.path.suffix == ".toml" else "json"
    return Host(
        id=kind.id,
        name=provider.name,
        path=spec.path,
        servers_key=spec.servers_at[0],
        adapt=spec.adapt,
        format=document_format,
        marker=marker,
        root=root,
        shape=kind.shape,
        other_scopes=tuple(
            ScopeFile(
                other.level,
                other.path,
                tuple(str(at.project_root) if key == PROJECT_KEY else key for key in other.servers_at),
                other.adapt,
            )
            for other in provider.files(at)
            if other.level != "user"
        ),
    )


def gateway_command() -> list[str]:
    """The command a host should run to start the gateway (``serve`` not included).

    The absolute path of the ``mcpfleet`` being run, when it was run as the ``mcpfleet``
    script; else the ``mcpfleet`` on ``PATH``, made absolute; else this interpreter with
    ``-m mcpfleet.cli.main``. Absolute, because hosts started from a desktop (Claude Desktop,
    Cursor from the dock) do not get the shell's ``PATH``; not resolved through links, so an
    upgrade behind ``~/.local/bin/mcpfleet`` keeps working.
    """
    launched = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if launched is not None and launched.stem == "mcpfleet" and launched.is_file():
        return [os.path.abspath(launched)]
    on_path = shutil.which("mcpfleet")
    if on_path is not None:
        return [os.path.abspath(on_path)]
    return [sys.executable, "-m", "mcpfleet.cli.main"]
