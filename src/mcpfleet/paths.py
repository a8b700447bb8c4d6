"""Where mcpfleet keeps its user-level files.

Every path derives from ``HOME`` and the XDG variables (through platformdirs), read at
call time, so a test that points ``HOME`` at a temporary folder sees none of the real
user's files. ``MCPFLEET_HOME`` overrides mcpfleet's own user dir: config, state and
cache then all live under it. Folders mcpfleet creates are its owner's only (0700),
whatever the umask: they hold approvals, OAuth tokens and the tool cache.
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "mcpfleet"
PRIVATE_FOLDER_MODE = 0o700
SANDBOX_BACKEND_ENV = "MCPFLEET_SANDBOX_BACKEND"
"""Restricts the sandbox to one back-end (``transport/sandbox.py``): a setting of the machine,
so the daemon keeps it from the environment it was started in."""


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


def make_private_folder(path: Path) -> Path:
    """Create ``path`` and each missing folder above it with mode 0700, whatever the umask.

    ``Path.mkdir(mode=…, parents=True)`` applies the mode to the last folder only, and the
    umask to every folder: under ``umask 000`` the missing parents (mcpfleet's own folder
    above ``state/``, or ``~/.local/state`` itself) came out world-writable. The XDG base
    directory specification asks for 0700 for the base folders too. A folder that already
    exists keeps its mode.
    """
    missing: list[Path] = []
    folder = path
    while not folder.is_dir() and folder.parent != folder:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            # The umask can only remove bits from 0700, so the folder is never more open than
            # that, even before the chmod restores any owner bit the umask took away.
            os.mkdir(folder, PRIVATE_FOLDER_MODE)
        except FileExistsError:
            continue  # another process created it meanwhile
        os.chmod(folder, PRIVATE_FOLDER_MODE)
    return path
