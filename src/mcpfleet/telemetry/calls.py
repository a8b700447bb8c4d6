"""``Telemetry``: what a call tells the process's exports (``otel``, ``prometheus``), and the fleets
whose state their gauges read.

A gateway call is recorded once, where the gateway sends it on (``Gateway.call_tool``, and the
fast path's ``_FastCall``): ``gateway_call`` (a span current for the block, when tracing, parented
on the current span or else on the client's ``_meta`` trace context) or ``raw_call`` (the fast
path's, whose spans are never current: its answer arrives in another task), and both record the
call's metrics when they end. A client connection's call is ``connection_call``'s span, under
whichever span is current.

Each open gateway registers its fleet (``FleetSources.watch``, telemetry on or not); the gauges
(servers by state, sessions, processes) read every registered fleet when they are collected, a
server counted once by name and a process once by pid (a daemon's sessions are gateways over
views of one fleet).

Standard library only: the exports are imported by ``mcpfleet.telemetry`` when they are set up.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpfleet.telemetry.otel import OtelExport, RawSpans
    from mcpfleet.telemetry.prometheus import PrometheusMeters


@dataclass(frozen=True)
class FleetSnapshot:
    """One gateway's fleet as the gauges see it."""

    states: Mapping[str, str]
    """Each server's state (``connected``, ``failed``…), by name."""
    sessions: int
    """Client sessions the gateway serves now."""
    pids: frozenset[int]
    """The pids of its servers' processes (stdio servers connected now)."""


FleetSource = Callable[[], FleetSnapshot]


@dataclass(frozen=True)
class FleetTotals:
    """Every registered fleet, each server and process counted once."""

    servers_by_state: Mapping[str, int]
    sessions: int
    processes: int


class CallOutcome:
    """How a recorded call ended: set ``error`` (a short kind: ``tool_error``, a JSON-RPC code,
    ``cancelled``) before the record closes, or leave it ``None`` for a success."""

    __slots__ = ("error",)

    def __init__(self) -> None:
        self.error: str | None = None


class Telemetry:
    """The process's telemetry: an OpenTelemetry export, a Prometheus registry, or both."""

    def __init__(self, fleets: FleetSources | None = None) -> None:
        self.otel: OtelExport | None = None
        self.prometheus: PrometheusMeters | None = None
        self.fleets = fleets if fleets is not None else FleetSources()

    def attach_otel(self, export: OtelExport) -> None:
        self.otel = export
        export.observe(self)

    def attach_prometheus(self, meters: PrometheusMeters) -> None:
        self.prometheus = meters

    @property
    def tracing(self) -> bool:
        return self.otel is not None and self.otel.tracing

    # -- calls -----------------------------------------------------------------------------------------

    @contextmanager
    def gateway_call(
        self, server: str, tool: str, meta: Mapping[str, Any] | None = None
    ) -> Iterator[CallOutcome]:
        """Record one call the gateway sends to ``server``'s ``tool`` for the block; an exception
        out of it is recorded as an error of its type."""
        outcome = CallOutcome()
        started = time.perf_counter()
        spans = self.otel.gateway_span(server, tool, meta) if self.tracing and self.otel else nullcontext()
        try:
            with spans as span:
                try:
                    yield outcome
                except BaseException as error:
                    outcome.error = outcome.error or error_kind(error)
                    raise
                finally:
                    if span is not None and self.otel is not None:
                        self.otel.outcome(span, outcome.error)
        finally:
            self.record(server, tool, time.perf_counter() - started, outcome.error)

    def raw_call(self, server: str, tool: str, meta: Mapping[str, Any] | None) -> RawCall:
        """A call the fast path sends below the SDK: ended by ``RawCall.end``, in any task."""
        spans = self.otel.raw_spans(server, tool, meta) if self.tracing and self.otel else None
        return RawCall(self, server, tool, spans)

    def connection_call(self, server: str, tool: str, transport: str) -> Any:
        """The client connection's span of one call (a context manager; a no-op unless tracing)."""
        if self.tracing and self.otel is not None:
            return self.otel.connection_span(server, tool, transport)
        return nullcontext()

    def record(self, server: str, tool: str, seconds: float, error: str | None) -> None:
        if self.prometheus is not None:
            self.prometheus.record(server, tool, seconds, error)
        if self.otel is not None:
            self.otel.record(server, tool, seconds, error)

    def fleet_totals(self) -> FleetTotals:
        return self.fleets.totals()


class FleetSources:
    """The fleets of the open gateways of this process, whether or not telemetry is on yet (a
    dashboard that starts recording later sees every gateway opened before it)."""

    def __init__(self) -> None:
        self._sources: dict[int, FleetSource] = {}

    def watch(self, source: FleetSource) -> Callable[[], None]:
        """Read ``source`` for the gauges until the returned function is called."""
        key = id(source)
        self._sources[key] = source

        def unwatch() -> None:
            self._sources.pop(key, None)

        return unwatch

    def totals(self) -> FleetTotals:
        states: dict[str, str] = {}
        pids: set[int] = set()
        sessions = 0
        for source in list(self._sources.values()):
            try:
                snapshot = source()
            except RuntimeError:
                continue  # read from the metric reader's thread while the fleet changed: next time
            states.update(snapshot.states)
            pids.update(snapshot.pids)
            sessions += snapshot.sessions
        return FleetTotals(dict(Counter(states.values())), sessions, len(pids))


def error_kind(error: BaseException) -> str:
    """``error.type`` of a call that raised ``error``: ``cancelled``, the JSON-RPC code of a
    backend's own error (as the fast path records it), or the exception's type."""
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    code = getattr(error, "code", None)
    return str(code) if isinstance(code, int) else type(error).__name__


class RawCall:
    """One fast-path call being recorded: its spans (when tracing) and its start, until ``end``."""

    __slots__ = ("_spans", "_started", "_telemetry", "server", "tool")

    def __init__(self, telemetry: Telemetry, server: str, tool: str, spans: RawSpans | None) -> None:
        self._telemetry = telemetry
        self.server = server
        self.tool = tool
        self._spans = spans
        self._started = time.perf_counter()

    def backend_meta(self) -> dict[str, str] | None:
        """The trace context the backend is sent in its request's ``_meta`` (``None``: none)."""
        return self._spans.backend_meta() if self._spans is not None else None

    def end(self, error: str | None) -> None:
        """Close the spans and record the call: ``error`` as ``CallOutcome.error``."""
        if self._spans is not None:
            self._spans.end(error)
            self._spans = None
        self._telemetry.record(self.server, self.tool, time.perf_counter() - self._started, error)
