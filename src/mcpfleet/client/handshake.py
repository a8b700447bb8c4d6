"""The protocol era of a connection: what is known beforehand, and the SDK ``Client`` it leads to.

The era is the SDK's business (its ``Client`` modes), steered here by what is known about the
server: a remembered verdict (``EraVerdict``, from the tool cache) connects without any probe
(``initialize`` for a legacy server, the remembered ``DiscoverResult`` adopted for a 2026-07-28
one); with none, the SDK's ``auto`` mode probes ``server/discover`` and falls back to
``initialize``, with the probe cut short after the probe bound (``probe.py``) so a server that
drops unknown requests costs that bound, not the SDK's 10 s.

``plan_connection`` decides the mode; ``negotiated_client`` enters the ``Client`` (the handshake)
around the wrapped transport and yields what it showed about the server's era.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import mcp_types
from mcp import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcpfleet.client.definitions import LEGACY_ERA, Era, EraVerdict
from mcpfleet.client.probe import ProbeBound
from mcpfleet.client.screening import ToolScreen
from mcpfleet.client.watched import WatchedTransport

logger = logging.getLogger(__name__)

CLIENT_NAME = "mcpfleet"
CLIENT_VERSION = "0.1.0"
INPUT_REQUIRED_MAX_ROUNDS = 10
"""A 2026-07-28 request answered with ``input_required`` is retried at most this many times."""


@dataclass(frozen=True)
class ConnectPlan:
    """How to connect: the SDK ``Client`` mode, the ``DiscoverResult`` to adopt, and whether
    both come from the remembered verdict (which the server may since refuse)."""

    mode: str
    prior_discover: mcp_types.DiscoverResult | None = None
    from_verdict: bool = False

    @property
    def probes(self) -> bool:
        """Whether connecting sends a ``server/discover`` probe."""
        return self.mode == "auto"


def plan_connection(server: str, transport: str, remembered: EraVerdict | None) -> ConnectPlan:
    """The plan for a server, from its transport and the verdict remembered for it."""
    if transport == "sse":
        # The HTTP+SSE transport predates the 2026-07-28 revision: nothing to probe for.
        return ConnectPlan("legacy")
    if remembered == LEGACY_ERA:
        return ConnectPlan("legacy", from_verdict=True)
    if isinstance(remembered, dict):
        try:
            discover = mcp_types.DiscoverResult.model_validate(remembered)
        except ValidationError as error:
            logger.info("%s: the remembered DiscoverResult is unusable (%s); probing", server, error)
            return ConnectPlan("auto")
        mutual = [version for version in MODERN_PROTOCOL_VERSIONS if version in discover.supported_versions]
        if mutual:
            return ConnectPlan(mutual[-1], discover, from_verdict=True)
    return ConnectPlan("auto")


@dataclass(frozen=True)
class Negotiated:
    """A ``Client`` past its handshake, and what the handshake showed."""

    client: Client
    era: Era
    verdict: EraVerdict
    """What to remember about the server's era for the next connection."""
    probe_timed_out: bool


@asynccontextmanager
async def negotiated_client(
    transport: Any,
    plan: ConnectPlan,
    *,
    server: str,
    probe_bound_s: float,
    on_transport_end: Callable[[], None],
    screen: ToolScreen | None = None,
    **client_options: Any,
) -> AsyncIterator[Negotiated]:
    """The SDK ``Client`` over ``transport``, entered (the handshake done) for the block.

    ``client_options`` are the ``Client`` callbacks (roots, messages, elicitation, sampling);
    ``screen`` screens the answers to ``tools/list`` (``screening.py``).
    """
    probe = ProbeBound(transport, probe_bound_s) if plan.probes else None
    watched = WatchedTransport(probe or transport, on_transport_end, screen)
    if plan.prior_discover is not None:
        watched.speaks_modern()
    client = Client(
        watched,
        mode=plan.mode,
        prior_discover=plan.prior_discover,
        cache=None,
        client_info=mcp_types.Implementation(name=CLIENT_NAME, version=CLIENT_VERSION),
        input_required_max_rounds=INPUT_REQUIRED_MAX_ROUNDS,
        **client_options,
    )
    async with client:
        if screen is not None:
            screen.protocol_version = client.protocol_version
        if probe is not None:
            probe.settle()
        discover = client.session.discover_result
        if discover is not None:
            watched.speaks_modern()
        verdict: EraVerdict = (
            LEGACY_ERA
            if discover is None
            else discover.model_dump(by_alias=True, mode="json", exclude_none=True)
        )
        if discover is None and probe is not None and probe.late_discover is not None:
            verdict = _late_discover_verdict(server, probe.late_discover) or verdict
        yield Negotiated(
            client=client,
            era="legacy" if discover is None else "modern",
            verdict=verdict,
            probe_timed_out=probe is not None and probe.timed_out,
        )


def _late_discover_verdict(server: str, answer: dict[str, Any]) -> EraVerdict | None:
    """A ``DiscoverResult`` that came after the probe's bound, as the era verdict.

    Its server was still booting when the bound passed, so this connection went on with
    ``initialize``; the answer shows it speaks 2026-07-28, which the next connection uses.
    """
    try:
        discover = mcp_types.DiscoverResult.model_validate(answer)
    except ValidationError:
        return None
    if not any(version in discover.supported_versions for version in MODERN_PROTOCOL_VERSIONS):
        return None
    logger.info("%s answered server/discover after the probe's bound; next time: 2026-07-28", server)
    verdict: EraVerdict = discover.model_dump(by_alias=True, mode="json", exclude_none=True)
    return verdict


__all__ = ["ConnectPlan", "Negotiated", "negotiated_client", "plan_connection"]
