"""The daemon's control connections: ``wire.CONTROL_OPS``, each answered by id, concurrently.

A request is one line ``{"id": 1, "op": "tools", ...}``; its answer ``{"id": 1, "result":
{...}}`` or ``{"id": 1, "error": {"message", "exit"}}`` (``exit``: the code a command ends
with, as the CLI contract gives it: 2 for a request that is wrong, 1 for an operation that
failed). Requests run at once, each in its own task, so a slow ``call`` never holds a
``ping`` back; answers go out whole, one line at a time. Closing the connection cancels what
still runs on it (a ``call`` is cancelled at its backend, a ``watch`` ends).

``fleet_status``, ``tools`` and ``call`` build the documents ``mcpfleet status/tools/call
--json`` print in-process, with the same code (``reports``), on a view of the shared
fleet for the request's ``fleet`` (a ``FleetSpec``) that leaves out what the agent's
discovery does (Exa servers): the CLI prints what it is given.
``watch`` keeps such a view for as long as it runs and pushes ``{"event": "tools_changed",
"id": <the watch's id>}`` after each change of that fleet's tools (a burst of changes
gives one event: the reader lists the tools again anyway). ``cancel`` ends one request of
the same connection (a ``call``, a ``watch``), which is answered with an error (``exit``
130) if it was still running. ``ui`` answers a one-time login link of the daemon's dashboard
(``daemon.dashboard``), which the first ``ui`` starts.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from mcpfleet.config.entry_filters import named_entry_filter
from mcpfleet.config.profiles import Profile, read_gateway_settings
from mcpfleet.contract import wire
from mcpfleet.contract.exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE
from mcpfleet.contract.framing import LineFramer, OversizedLine, describe_size
from mcpfleet.daemon.socket_io import receive, send_all
from mcpfleet.errors import ConfigError, DaemonError

if TYPE_CHECKING:
    from mcpfleet.config.model import DiscoveryResult
    from mcpfleet.daemon.service import Client, DaemonService
    from mcpfleet.daemon.view import FleetView
    from mcpfleet.fleet.events import ManagerEvent
    from mcpfleet.fleet.startup import StartupReport

logger = logging.getLogger(__name__)


class ControlError(DaemonError):
    """An operation's failure, answered as ``{"error": {"message", "exit"}}``."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(eq=False)
class Operation:
    """One request being served: what it asked, and how its answer and events go out."""

    service: DaemonService
    client: Client
    id: int | str
    request: dict[str, Any]
    send: Send
    running: dict[int | str, anyio.CancelScope]
    """The requests of this connection still running, by id (what ``cancel`` looks in)."""
    answered: bool = False
    after_answer: list[Callable[[], None]] = field(default_factory=list)

    async def answer(self, result: dict[str, Any]) -> None:
        self.answered = True
        await self.send({"id": self.id, "result": result})
        for action in self.after_answer:
            action()

    def fleet_spec(self) -> wire.FleetSpec:
        try:
            return wire.FleetSpec.from_json(self.request.get("fleet"))
        except wire.WireError as error:
            raise ControlError(f"{self.request.get('op')}: {error}", EXIT_USAGE) from None

    def profile(self, spec: wire.FleetSpec) -> Profile | None:
        """The profile ``spec`` names, from mcpfleet's user config as it is now."""
        if spec.profile is None:
            return None
        try:
            return read_gateway_settings().profile(spec.profile)
        except ConfigError as error:
            raise ControlError(f"{self.request.get('op')}: {error}", EXIT_USAGE) from None

    @asynccontextmanager
    async def view(
        self, *, settle_deferred: bool = False
    ) -> AsyncIterator[tuple[FleetView, DiscoveryResult, StartupReport]]:
        """A view of the fleet the request names, past its start-up gate as an agent's fleet
        would be (see ``reports.status.settle``), with its discovery and the gate's report.
        ``settle_deferred`` also waits for the servers the gate served from the cache (what
        ``status`` reports on), in the same parallel wait."""
        from mcpfleet.reports import status as status_report

        spec = self.fleet_spec()
        async with (
            self.service.fleet.attach(
                spec,
                session_id=f"{self.client.id}.{self.id}",
                host=self.client.host,
                profile=self.profile(spec),
                # A control request stands for a CLI command or an agent session: it sees the
                # fleet as they do in-process, with the filters their side named (the agent's
                # Exa filter), applied here as data.
                entry_filter=named_entry_filter(spec.entry_filters),
                # Resolved with what the command's process sent, never the daemon's own values.
                environment=self.client.environment,
            ) as view,
            view,
        ):
            discovery = view.discover()
            result = await view.connect_servers(discovery.configs, discovery.sources)
            await status_report.settle(view, result, late_only=not settle_deferred)
            yield view, discovery, result


OperationHandler = Callable[[Operation], Awaitable[dict[str, Any]]]


async def serve_control(
    service: DaemonService, connection: socket.socket, client: Client, already_read: bytes = b""
) -> None:
    """Serve ``connection``'s requests until it ends; whatever still runs then is cancelled.
    ``already_read``: what came right behind the hello (the first requests)."""
    lock = anyio.Lock()

    async def send(document: dict[str, Any]) -> None:
        data = wire.encode_line(document)
        async with lock:
            await send_all(connection, data)

    framer = LineFramer(wire.MAX_CONTROL_LINE_BYTES)
    running: dict[int | str, anyio.CancelScope] = {}
    async with anyio.create_task_group() as operations:
        chunk = already_read
        while True:
            for line in framer.feed(chunk):
                if isinstance(line, OversizedLine):
                    message = (
                        f"a request of {line.size} bytes is over the limit of "
                        f"{describe_size(wire.MAX_CONTROL_LINE_BYTES)}"
                    )
                    await send({"id": None, "error": {"message": message, "exit": EXIT_USAGE}})
                elif line.strip():
                    operations.start_soon(_run, service, client, bytes(line), send, running)
            chunk = await receive(connection)
            if not chunk:
                break
        operations.cancel_scope.cancel()


async def _run(
    service: DaemonService,
    client: Client,
    line: bytes,
    send: Send,
    running: dict[int | str, anyio.CancelScope],
) -> None:
    try:
        request = wire.decode_line(line)
    except wire.WireError as error:
        await send({"id": None, "error": {"message": f"not a request: {error}", "exit": EXIT_USAGE}})
        return
    request_id = request.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str) or request_id in running:
        message = 'a request needs an "id" (a number or a string) that none of its running requests has'
        await send({"id": None, "error": {"message": message, "exit": EXIT_USAGE}})
        return
    op = request.get("op")
    handler = OPERATIONS.get(op) if isinstance(op, str) else None
    operation = Operation(service, client, request_id, request, send, running)
    with anyio.CancelScope() as scope:
        running[request_id] = scope
        try:
            if handler is None:
                raise ControlError(f"unknown op {op!r}: one of {', '.join(OPERATIONS)}", EXIT_USAGE)
            result = await handler(operation)
        except Exception as error:
            # Raised inside a view, it comes wrapped in the fleet's task groups.
            failure = _control_error_in(error)
            if failure is None:
                logger.exception("control op %s failed", op)
                failure = ControlError(f"the daemon failed: {error}")
            await send({"id": request_id, "error": {"message": failure.message, "exit": failure.exit_code}})
            return
        finally:
            del running[request_id]
        if not operation.answered:
            await operation.answer(result)
    if scope.cancelled_caught:
        await send(
            {"id": request_id, "error": {"message": "cancelled by the client", "exit": EXIT_INTERRUPTED}}
        )


def _control_error_in(error: BaseException) -> ControlError | None:
    """``error`` itself, or the one ``ControlError`` inside its exception groups."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error if isinstance(error, ControlError) else None


# -- the operations -----------------------------------------------------------------------------------


async def _ping(operation: Operation) -> dict[str, Any]:
    return operation.service.ping_document()


async def _status(operation: Operation) -> dict[str, Any]:
    return operation.service.status_document()


async def _stop(operation: Operation) -> dict[str, Any]:
    # After the answer is out: stopping cancels this connection too.
    operation.after_answer.append(
        lambda: operation.service.stop(f"asked to by {operation.client.host or 'a client'}")
    )
    return {}


async def _fleet_status(operation: Operation) -> dict[str, Any]:
    from mcpfleet.reports import status as status_report

    async with operation.view(settle_deferred=True) as (view, discovery, result):
        rows = status_report.server_rows(discovery, view, result)
    return status_report.status_document(rows, status_report.error_rows(discovery.errors))


async def _tools(operation: Operation) -> dict[str, Any]:
    from mcpfleet.reports import messages
    from mcpfleet.reports import status as status_report
    from mcpfleet.reports import tools as tool_report

    server = operation.request.get("server")
    if server is not None and not isinstance(server, str):
        raise ControlError('"server" must be a string', EXIT_USAGE)
    async with operation.view() as (view, discovery, result):
        declared = [entry.name for entry in discovery.entries]
        if server is not None and server not in declared:
            raise ControlError(messages.unknown_server_message(server, declared), EXIT_USAGE)
        tools = tool_report.tool_rows(view.get_tools(), server=server, withheld=view.withheld_tools())
    return tool_report.tools_document(tools, status_report.error_rows([*discovery.errors, *result.failures]))


async def _call(operation: Operation) -> dict[str, Any]:
    from mcpfleet.fleet.pinning import withheld_named
    from mcpfleet.fleet.tools import resolve_tool_name
    from mcpfleet.reports import messages
    from mcpfleet.reports import tools as tool_report

    name, arguments = operation.request.get("tool"), operation.request.get("arguments", {})
    if not isinstance(name, str):
        raise ControlError('"tool" must be a tool name', EXIT_USAGE)
    if not isinstance(arguments, dict):
        raise ControlError('"arguments" must be a JSON object, e.g. {"path": "README.md"}', EXIT_USAGE)
    async with operation.view() as (view, discovery, _):
        tools = view.get_tools()
        tool = resolve_tool_name(name, tools)
        withheld = withheld_named(name, view.withheld_tools()) if tool is None else None
        if withheld is not None:
            return tool_report.withheld_call_document(withheld)
        if tool is None:
            declared = [entry.name for entry in discovery.entries]
            raise ControlError(messages.no_such_tool_message(name, tools, declared))
        result = await tool.execute(arguments)
    return tool_report.call_document(result)


async def _watch(operation: Operation) -> dict[str, Any]:
    async with operation.view() as (view, _, _):
        changed = anyio.Event()

        def on_event(event: ManagerEvent) -> None:
            if event.kind == "tools_changed":
                changed.set()

        stop_listening = view.subscribe(on_event)
        try:
            await operation.answer({})
            while True:
                await changed.wait()
                changed = anyio.Event()
                await operation.send({"event": "tools_changed", "id": operation.id})
        finally:
            stop_listening()


async def _ui(operation: Operation) -> dict[str, Any]:
    dashboard = operation.service.dashboard
    if operation.request.get("metrics") is True:
        url, token = await dashboard.metrics_scrape()
        return {"url": url, "token": token}
    return {"url": await dashboard.login_link()}


async def _cancel(operation: Operation) -> dict[str, Any]:
    target = operation.request.get("request")
    if isinstance(target, bool) or not isinstance(target, int | str):
        raise ControlError('"request" must be the id of a request of this connection', EXIT_USAGE)
    scope = operation.running.get(target)
    if scope is not None and target != operation.id:
        scope.cancel()
    # A request that already ended is not an error: the answer and the cancel crossed.
    return {}


OPERATIONS: dict[str, OperationHandler] = {
    "ping": _ping,
    "status": _status,
    "stop": _stop,
    "fleet_status": _fleet_status,
    "tools": _tools,
    "call": _call,
    "watch": _watch,
    "cancel": _cancel,
    "ui": _ui,
}
assert OPERATIONS.keys() == wire.CONTROL_OPS.keys(), "every op of the wire is served, and only those"
