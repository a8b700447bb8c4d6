"""Which sandbox a stdio entry gets when it declares none, per level.

A project entry comes with a repository, which is code the user did not write: it runs in a
sandbox unless its entry (or the user) says otherwise. A local or user entry is the user's
own: it runs unconfined by default. ``"sandbox"`` at the top of mcpfleet's user config
changes these defaults, one level at a time::

    "sandbox": {"project": {"network": false}, "user": true}

Each value takes what a server entry's ``"sandbox"`` takes (``true``, ``false`` or
``{"network", "paths", "readOnlyPaths"}``). A malformed value is one error naming the file;
the built-in defaults then apply.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mcpfleet.config.model import SANDBOX_OFF, Level, Sandbox
from mcpfleet.config.normalise import EntryError, sandbox_setting
from mcpfleet.errors import Failure

SANDBOX_DEFAULTS_KEY = "sandbox"
LEVELS: tuple[Level, ...] = ("project", "local", "user")


def _built_in() -> dict[Level, Sandbox]:
    return {"project": Sandbox(), "local": SANDBOX_OFF, "user": SANDBOX_OFF}


@dataclass(frozen=True)
class SandboxDefaults:
    """The sandbox of an entry that declares none, by its level."""

    by_level: dict[Level, Sandbox] = field(default_factory=_built_in)

    def applied(self, declared: Sandbox | None, level: Level, working_dir: Path) -> Sandbox:
        """The sandbox an entry of ``level`` runs in, its relative paths taken from its
        working folder."""
        sandbox = declared if declared is not None else self.by_level[level]
        if not sandbox.enabled:
            return sandbox
        return replace(
            sandbox,
            paths=tuple(str(working_dir / path) for path in sandbox.paths),
            read_only_paths=tuple(str(working_dir / path) for path in sandbox.read_only_paths),
        )


def read_sandbox_defaults(document: Any, path: Path, errors: list[Failure]) -> SandboxDefaults:
    """The defaults ``"sandbox"`` in mcpfleet's user config (``document``, read from ``path``)
    sets; a malformed value is added to ``errors`` and the built-in defaults are kept."""
    value = document.get(SANDBOX_DEFAULTS_KEY) if isinstance(document, dict) else None
    if value is None:
        return SandboxDefaults()
    try:
        return SandboxDefaults(_parsed(value))
    except EntryError as error:
        errors.append(Failure(str(path), "config", f"{path}: {error}"))
        return SandboxDefaults()


def _parsed(value: Any) -> dict[Level, Sandbox]:
    fix = 'write e.g. "sandbox": {"project": true, "user": false}'
    if not isinstance(value, dict):
        raise EntryError(f'"sandbox" must be an object of levels ({", ".join(LEVELS)}), not {value!r}; {fix}')
    by_level = _built_in()
    for key, setting in value.items():
        level = next((level for level in LEVELS if level == key), None)
        if level is None:
            raise EntryError(f'"sandbox" has unknown level {key!r} (known: {", ".join(LEVELS)}); {fix}')
        parsed = sandbox_setting(setting, f'"sandbox.{level}"')
        if parsed is not None:
            by_level[level] = parsed
    return by_level
