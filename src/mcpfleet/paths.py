"""Where mcpfleet keeps its user-level files.

Every path derives from ``HOME`` and the XDG variables (through platformdirs), read at
call time, so a test that points ``HOME`` at a temporary folder sees none of the real
user's files. ``MCPFLEET_HOME`` overrides mcpfleet's own user dir: config, state and
cache then all live under it.
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "mcpfleet"


def home_dir() -> Path:
    """The user's home, from ``HOME`` first (platformdirs and tests rely on it)."""
    return Path(os.environ.get("HOME") or Path.home())


def neutral_working_dir() -> Path:
    """Where a process runs when no project declared it: the user's home.

    A working directory is code: ``python -m pkg`` imports ``./pkg`` and ``npx pkg`` finds
    ``./node_modules/pkg`` before anything installed. The home is the folder a fresh terminal
    or a desktop MCP host starts in, it is the same whichever file defined the server, and it
    is never a checkout's own folder (a config file's folder can be: a ``--config`` file, or
    ``CODEX_HOME`` pointed into a repository). A missing home falls back to the root folder.
    """
    home = home_dir()
    return home if home.is_dir() else Path(home.anchor or os.sep)


def _override() -> Path | None:
    value = os.environ.get("MCPFLEET_HOME")
    return Path(value).expanduser() if value else None


def user_config_dir() -> Path:
    """Folder of mcpfleet's user config (``mcp.json``)."""
    override = _override()
    if override is not None:
        return override / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def user_state_dir() -> Path:
    """Folder of approvals and OAuth tokens: state that must survive but is not config."""
    override = _override()
    if override is not None:
        return override / "state"
    import platformdirs

    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False))


def user_cache_dir() -> Path:
    """Folder of the tool cache: everything here can be rebuilt."""
    override = _override()
    if override is not None:
        return override / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def user_config_file() -> Path:
    """mcpfleet's user-level config file."""
    return user_config_dir() / "mcp.json"


def project_config_file(project_root: Path) -> Path:
    """mcpfleet's project-level config file."""
    return project_root / ".mcpfleet" / "mcp.json"
