"""How one manager behaves: every knob of ``MCPManager(...)``, in one frozen record."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from mcpfleet.contract.defaults import STARTUP_TIMEOUT_MS as STARTUP_TIMEOUT_MS
from mcpfleet.fleet.supervision import ReconnectPolicy

if TYPE_CHECKING:
    from mcpfleet.client.connection import ElicitationHandler, SamplingHandler, ServerRequestHandler
    from mcpfleet.client.definitions import LogLevel
    from mcpfleet.client.inbound import RootsOffer
    from mcpfleet.config import EntryFilter

SHUTDOWN_TIMEOUT_S = 6.0
"""One deadline for closing every server together."""

LIST_CHANGED_DEBOUNCE_MS = 150
"""``tools/list_changed`` notifications arriving within this delay cause one re-list."""

LIST_CHANGED_MIN_INTERVAL_S = 1.0
"""At least this long between the starts of two re-lists of one server, however often it
announces a change: a server that floods ``list_changed`` costs one re-list a second."""

WATCH_INTERVAL_S = 0.25
"""How often watched config files are checked for a change."""

ROOTS_NOTICE_BOUND_S = 5.0
"""How long telling every server that the roots changed may take (a server that does not read
its input must not hold up the one who changed them)."""

UncachedPolicy = Literal["wait", "late-join"]
"""What the start-up gate does with a server still starting that has no cached tools:
wait for it (correctness before speed), or let it join later with a ``tools_changed``."""


@dataclass(frozen=True)
class FleetSettings:
    """The manager's constructor arguments, read by every part of the fleet."""

    cwd: Path
    startup_timeout_ms: int = STARTUP_TIMEOUT_MS
    on_uncached: UncachedPolicy = "wait"
    enable_project_config: bool = True
    trust_project: bool = False
    entry_filter: EntryFilter | None = None
    extra_config_paths: tuple[Path, ...] = ()
    shutdown_timeout_s: float = SHUTDOWN_TIMEOUT_S
    reconnect_policy: ReconnectPolicy = field(default_factory=ReconnectPolicy)
    watch: bool = False
    watch_interval_s: float = WATCH_INTERVAL_S
    list_changed_debounce_ms: int = LIST_CHANGED_DEBOUNCE_MS
    list_changed_min_interval_s: float = LIST_CHANGED_MIN_INTERVAL_S
    elicitation_handler: ElicitationHandler | None = None
    sampling_handler: SamplingHandler | None = None
    server_requests: ServerRequestHandler | None = None
    probe_timeout_ms: int | None = None
    log_level: LogLevel | None = None
    roots: RootsOffer = "working-folder"
