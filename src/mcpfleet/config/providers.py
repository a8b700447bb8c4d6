"""Every config source mcpfleet reads: which files, at which level, under which key, with
which adapter and substitution dialect. The table is the documentation; the order of
``PROVIDERS`` is the provider precedence (mcpfleet's own files first).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mcpfleet import paths
from mcpfleet.config.gateway_entry import MOVED_SERVERS_KEY, REPLACED_KEY, moved_entries_file
from mcpfleet.config.model import Level
from mcpfleet.config.normalise import (
    Adapter,
    adapt_cline,
    adapt_codex,
    adapt_continue,
    adapt_goose,
    adapt_opencode,
    adapt_seconds,
    adapt_standard,
    adapt_vscode,
    adapt_zed,
)
from mcpfleet.config.substitution import Dialect

PROJECT_KEY = "<project>"
"""Placeholder in a key path for the absolute project root (Claude's ``projects`` map)."""


@dataclass(frozen=True)
class Locations:
    """The folders every provider's paths derive from, read from the environment once."""

    project_root: Path
    home: Path
    xdg_config: Path
    app_data: Path
    """Per-OS application data folder (``~/Library/Application Support``, ``%APPDATA%``, XDG)."""
    environ: Mapping[str, str]

    @classmethod
    def current(cls, project_root: Path) -> Locations:
        home = paths.home_dir()
        xdg_config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        if sys.platform == "darwin":
            app_data = home / "Library" / "Application Support"
        elif sys.platform == "win32":
            app_data = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
        else:
            app_data = xdg_config
        return cls(project_root, home, xdg_config, app_data, dict(os.environ))

    @property
    def vscode_user(self) -> Path:
        return self.app_data / "Code" / "User"


@dataclass(frozen=True)
class FileSpec:
    """One file to read and where its servers sit in it."""

    path: Path
    level: Level
    servers_at: tuple[str, ...] = ("mcpServers",)
    adapt: Adapter = adapt_standard
    dialect: Dialect = "none"
    listed: bool = False
    """Servers are a list of objects carrying ``name`` (Continue) rather than a map."""


@dataclass(frozen=True)
class Provider:
    id: str
    name: str
    files: Callable[[Locations], list[FileSpec]]


def _with_replaced(user_file: FileSpec) -> list[FileSpec]:
    """A host's user file, then the entries ``mcpfleet hosts install --replace`` moved aside
    in it: the host no longer reads them, the gateway (reading them here) still serves them."""
    return [user_file, replace(user_file, servers_at=(REPLACED_KEY,))]


def _mcpfleet(at: Locations) -> list[FileSpec]:
    return [
        FileSpec(paths.project_config_file(at.project_root), "project", dialect="posix"),
        FileSpec(paths.user_config_file(), "user", dialect="posix"),
    ]


def _claude_code(at: Locations) -> list[FileSpec]:
    config_dir = at.environ.get("CLAUDE_CONFIG_DIR")
    user_file = Path(config_dir) / ".claude.json" if config_dir else at.home / ".claude.json"
    return [
        FileSpec(user_file, "local", ("projects", PROJECT_KEY, "mcpServers"), dialect="posix"),
        FileSpec(at.project_root / ".mcp.json", "project", dialect="posix"),
        *_with_replaced(FileSpec(user_file, "user", dialect="posix")),
    ]


def _codex(at: Locations) -> list[FileSpec]:
    codex_home = Path(at.environ.get("CODEX_HOME") or at.home / ".codex")
    user_file = codex_home / "config.toml"
    # Codex warns at every start about a table it does not know: `hosts install --replace`
    # keeps what it moves aside in mcpfleet's state (older installs: replaced_by_mcpfleet).
    moved = FileSpec(
        moved_entries_file("codex", user_file), "user", (MOVED_SERVERS_KEY,), adapt_codex, "codex"
    )
    return [
        *_pair(
            at.project_root / ".codex" / "config.toml",
            user_file,
            servers_at=("mcp_servers",),
            adapt=adapt_codex,
            dialect="codex",
            host=True,
        ),
        moved,
    ]


def _pair(project: Path, user: Path, *, host: bool = False, **options: Any) -> list[FileSpec]:
    """A tool with the same file shape at project and user level; a ``host`` (one that
    ``mcpfleet hosts install`` writes to) also has its replaced entries read."""
    user_file = FileSpec(user, "user", **options)
    return [FileSpec(project, "project", **options), *(_with_replaced(user_file) if host else [user_file])]


def _opencode(at: Locations) -> list[FileSpec]:
    # OpenCode's own precedence is ascending (.opencode/ > project root > user); first wins here.
    names = ("opencode.jsonc", "opencode.json")
    project = [folder / name for folder in (at.project_root / ".opencode", at.project_root) for name in names]
    options: dict[str, Any] = {"servers_at": ("mcp",), "adapt": adapt_opencode, "dialect": "opencode"}
    return [
        *(FileSpec(path, "project", **options) for path in project),
        *(FileSpec(at.xdg_config / "opencode" / name, "user", **options) for name in names),
    ]


def _windsurf(at: Locations) -> list[FileSpec]:
    current, *older = (
        FileSpec(at.home / ".codeium" / folder / "mcp_config.json", "user", dialect="editor")
        for folder in ("windsurf", "windsurf-next", "")
    )
    return [*_with_replaced(current), *older]


def _claude_desktop(at: Locations) -> list[FileSpec]:
    return _with_replaced(FileSpec(at.app_data / "Claude" / "claude_desktop_config.json", "user"))


def _continue(at: Locations) -> list[FileSpec]:
    return [
        *_block_folder(at.project_root / ".continue" / "mcpServers", "project"),
        FileSpec(at.home / ".continue" / "config.yaml", "user", adapt=adapt_continue, listed=True),
        *_block_folder(at.home / ".continue" / "mcpServers", "user"),
    ]


def _block_folder(folder: Path, level: Level) -> Iterator[FileSpec]:
    """Continue's block folder: YAML blocks (a ``mcpServers`` list) and Claude-style JSON files."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_file())
    except OSError:
        return
    for name in names:
        path = folder / name
        if path.suffix in (".yaml", ".yml"):
            yield FileSpec(path, level, adapt=adapt_continue, listed=True)
        elif path.suffix == ".json":
            yield FileSpec(path, level)


PROVIDERS: tuple[Provider, ...] = (
    Provider("mcpfleet", "mcpfleet", _mcpfleet),
    Provider("claude-code", "Claude Code", _claude_code),
    Provider("codex", "OpenAI Codex", _codex),
    Provider(
        "gemini",
        "Gemini CLI",
        lambda at: _pair(
            at.project_root / ".gemini" / "settings.json",
            at.home / ".gemini" / "settings.json",
            dialect="gemini",
            host=True,
        ),
    ),
    Provider("opencode", "OpenCode", _opencode),
    Provider(
        "cursor",
        "Cursor",
        lambda at: _pair(
            at.project_root / ".cursor" / "mcp.json",
            at.home / ".cursor" / "mcp.json",
            dialect="editor",
            host=True,
        ),
    ),
    Provider("windsurf", "Windsurf", _windsurf),
    Provider(
        "vscode",
        "VS Code",
        lambda at: _pair(
            at.project_root / ".vscode" / "mcp.json",
            at.vscode_user / "mcp.json",
            servers_at=("servers",),
            adapt=adapt_vscode,
            dialect="editor",
            host=True,
        ),
    ),
    Provider(
        "zed",
        "Zed",
        lambda at: _pair(
            at.project_root / ".zed" / "settings.json",
            at.xdg_config / "zed" / "settings.json",
            servers_at=("context_servers",),
            adapt=adapt_zed,
            host=True,
        ),
    ),
    Provider(
        "roo",
        "Roo Code",
        lambda at: _pair(
            at.project_root / ".roo" / "mcp.json",
            at.vscode_user
            / "globalStorage"
            / "rooveterinaryinc.roo-cline"
            / "settings"
            / "mcp_settings.json",
            adapt=adapt_seconds,
            dialect="editor",
        ),
    ),
    Provider(
        "cline",
        "Cline",
        lambda at: [
            FileSpec(path, "user", adapt=adapt_cline)
            for path in (
                at.vscode_user
                / "globalStorage"
                / "saoudrizwan.claude-dev"
                / "settings"
                / "cline_mcp_settings.json",
                at.home / ".cline" / "data" / "settings" / "cline_mcp_settings.json",
            )
        ],
    ),
    Provider("continue", "Continue", _continue),
    Provider(
        "goose",
        "Goose",
        lambda at: [FileSpec(at.xdg_config / "goose" / "config.yaml", "user", ("extensions",), adapt_goose)],
    ),
    Provider("claude-desktop", "Claude Desktop", _claude_desktop),
    Provider(
        "mcp-json",
        "MCP Config",
        lambda at: [FileSpec(at.project_root / "mcp.json", "project", dialect="posix")],
    ),
)

EXTRA_CONFIG_PROVIDER = Provider("config-file", "--config file", lambda at: [])
"""Files named with ``--config``: explicit, so they outrank everything discovered."""
