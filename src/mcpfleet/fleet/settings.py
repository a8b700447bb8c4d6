"""How one manager behaves: every knob of ``MCPManager(...)``, in one frozen record."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True, kw_only=True)
class FleetSettings:
    """The manager's constructor arguments, read by every part of the fleet: the record behind
    ``MCPManager(...)``'s keywords, built there (where each default and meaning is documented)."""

    cwd: Path
    startup_timeout_ms: int
    on_uncached: UncachedPolicy
    enable_project_config: bool
    trust_project: bool
    entry_filter: EntryFilter | None
    extra_config_paths: tuple[Path, ...]
    shutdown_timeout_s: float
    reconnect_policy: ReconnectPolicy
    watch: bool
    watch_interval_s: float
    list_changed_debounce_ms: int
    list_changed_min_interval_s: float
    elicitation_handler: ElicitationHandler | None
    sampling_handler: SamplingHandler | None
    server_requests: ServerRequestHandler | None
    probe_timeout_ms: int | None
    log_level: LogLevel | None
    roots: RootsOffer

    def __post_init__(self) -> None:
        if self.server_requests is not None and (
            self.elicitation_handler is not None
            or self.sampling_handler is not None
            or self.roots != "working-folder"
        ):
            raise ValueError(
                "MCPManager: pass either server_requests or elicitation_handler/sampling_handler/roots, "
                "not both"
            )
