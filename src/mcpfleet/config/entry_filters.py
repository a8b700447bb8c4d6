"""Discovery's entry filters by the names a ``FleetSpec`` carries (``contract.wire.ENTRY_FILTERS``).

The side that owns a fleet's policy decides which filters apply and says so as data (the
agent layer: the Exa filter, for its sessions and the CLI's commands); whoever runs the
discovery, this process or the daemon, turns the names into discovery's ``entry_filter``
hook here, so the daemon applies the agent's choice without importing the agent.
"""

from __future__ import annotations

import functools

from mcpfleet.config.discovery import EntryFilter
from mcpfleet.config.exa import exa_entry_filter
from mcpfleet.config.model import ServerConfig
from mcpfleet.contract.wire import EXA_ENTRY_FILTER

ENTRY_FILTERS: dict[str, EntryFilter] = {EXA_ENTRY_FILTER: exa_entry_filter}


@functools.cache
def named_entry_filter(names: tuple[str, ...]) -> EntryFilter | None:
    """The hook that applies the filters ``names``, in order (the first reason given is the
    entry's); None for none. The same names give the same hook, which is how the daemon's
    sessions with equal filters share one discovery."""
    hooks = [ENTRY_FILTERS[name] for name in names]
    if not hooks:
        return None
    if len(hooks) == 1:
        return hooks[0]

    def leave_out(config: ServerConfig) -> str | None:
        return next((reason for hook in hooks if (reason := hook(config)) is not None), None)

    return leave_out
