"""The one assembly of a gateway: ``open_gateway(fleet, options)``.

``mcpfleet serve --no-daemon`` (and ``--http``) serves its own ``MCPManager``; the daemon
serves each host session a view of the fleet it shares. Both build the same gateway here, in
the one order the parts allow: the relay first (on the client sessions it will ask), then the
fleet, given the relay as where its backends' questions go, then the ``Gateway`` over that
fleet, serving the relay's sessions. The caller says only which fleet (``fleet``: how to open
it, given the relay) and how to serve it (``options``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypeVar, get_args

from mcpfleet.contract.defaults import STARTUP_TIMEOUT_MS
from mcpfleet.errors import ConfigError
from mcpfleet.fleet.registry import Phase
from mcpfleet.gateway.budget import ToolBudget, ToolMode, tool_budget
from mcpfleet.gateway.core import Gateway, first_list_cap_ms
from mcpfleet.gateway.naming import NamingPolicy, PrefixMode
from mcpfleet.gateway.relay import ANSWER_TIMEOUT_S, Relay
from mcpfleet.gateway.sessions import ClientSessions
from mcpfleet.telemetry import watch_fleet
from mcpfleet.telemetry.calls import FleetSnapshot

if TYPE_CHECKING:
    from mcpfleet.gateway.guard import RequestGuard
    from mcpfleet.gateway.served_fleet import ServedFleet

FleetOpener = Callable[[Relay], AbstractAsyncContextManager["ServedFleet"]]
"""Opens the fleet a gateway serves, given the relay its backends' questions must reach: an
``MCPManager`` built with ``server_requests=relay`` (the gateway enters it), or the daemon's
``SharedFleet.attach(…, relay=relay)``."""

Choice = TypeVar("Choice", bound=str)


@dataclass(frozen=True)
class GatewayOptions:
    """How a gateway serves its fleet: ``serve``'s ``--tools``/``--max-tools``/``--profile``
    (the budget), ``--prefix``/``--max-name-length`` (the naming) and ``--startup-timeout``,
    from the command line or from a daemon session's hello."""

    budget: ToolBudget = field(default_factory=ToolBudget)
    naming: NamingPolicy = field(default_factory=NamingPolicy)
    startup_timeout_ms: int = STARTUP_TIMEOUT_MS
    answer_timeout_s: float = ANSWER_TIMEOUT_S
    """How long a backend's question waits for the client's answer (``gateway.relay``)."""
    guard: RequestGuard | None = None
    """What each request may see and do (``gateway.guard``): a team gateway's policies, audit
    and per-user credentials; ``None`` for the local gateway, where everything is served."""

    @classmethod
    def read(
        cls,
        *,
        tools: str,
        max_tools: int | None,
        profile: str | None,
        prefix: str,
        max_name_length: int,
        startup_timeout_ms: int,
    ) -> GatewayOptions:
        """The options of ``serve`` as given (strings a daemon session's hello may carry
        unchecked), with the tool budget read from mcpfleet's user config as it is now.
        ``ConfigError`` naming the option for a mode or prefix that is none of its choices, or
        for a profile the user config does not define."""
        budget = tool_budget(
            _choice(tools, get_args(ToolMode), "--tools"), max_tools=max_tools, profile=profile
        )
        naming = NamingPolicy(
            prefix=_choice(prefix, get_args(PrefixMode), "--prefix"), max_name_length=max_name_length
        )
        return cls(budget=budget, naming=naming, startup_timeout_ms=startup_timeout_ms)


@asynccontextmanager
async def open_gateway(fleet: FleetOpener, options: GatewayOptions) -> AsyncIterator[Gateway]:
    """The gateway over the fleet ``fleet`` opens, entered: connected and ready to be served
    (``gateway.handlers.build_server``); every part is closed when the block ends."""
    relay = Relay(ClientSessions(), answer_timeout_s=options.answer_timeout_s)
    async with (
        fleet(relay) as served,
        Gateway(
            served,
            naming=options.naming,
            relay=relay,
            budget=options.budget,
            first_list_wait_ms=first_list_cap_ms(options.startup_timeout_ms),
            guard=options.guard,
        ) as gateway,
    ):
        unwatch = watch_fleet(partial(fleet_snapshot, gateway))
        try:
            yield gateway
        finally:
            unwatch()


def fleet_snapshot(gateway: Gateway) -> FleetSnapshot:
    """What the telemetry's gauges read of ``gateway`` (``mcpfleet.telemetry.calls``): each
    server's state, the client sessions, the processes of the servers connected now."""
    fleet = gateway.fleet
    states: dict[str, str] = {}
    pids: set[int] = set()
    for name in fleet.get_all_server_names():
        state = fleet.get_server_state(name)
        states[name] = str(state.state)
        if state.pid is not None and state.state == Phase.CONNECTED:
            pids.add(state.pid)
    return FleetSnapshot(states, len(gateway.sessions), frozenset(pids))


def _choice(value: str, choices: tuple[Choice, ...], option: str) -> Choice:
    """``value`` as one of ``choices`` (a ``serve`` option); ``ConfigError`` otherwise."""
    for choice in choices:
        if value == choice:
            return choice
    raise ConfigError(f"{option} must be one of {', '.join(choices)}, not {value!r}")
