"""How a connection starts without making anyone wait for the SDK first.

Importing the SDK (``mcp``) takes about 0.6 s. Done on the event loop, the import would
stall every timer (the start-up gate among them) and every other server's spawn; done
before spawning, it would add to every cold start. So a stdio server is spawned first,
by code that needs no SDK, the SDK is imported in a worker thread while the child
boots, and only then does the connection's owner task take over the running process.

This module imports nothing of the SDK; ``mcpfleet.client.connection`` does.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread

from mcpfleet.errors import ConnectError
from mcpfleet.transport.stdio import StdioTransport, prepare_stdio_transport

if TYPE_CHECKING:
    from mcpfleet.client.connection import (
        ElicitationHandler,
        NotificationCallback,
        SamplingHandler,
        ServerConnection,
    )
    from mcpfleet.client.definitions import EraVerdict
    from mcpfleet.config.model import ServerConfig

CONNECTION_MODULE = "mcpfleet.client.connection"


_imported: dict[str, ModuleType] = {}
"""Modules whose import has completed. ``sys.modules`` is no such record: it also holds a
module that another thread is still importing, half initialised."""


async def import_off_loop(module_name: str) -> ModuleType:
    """A module that imports the SDK, imported in a worker thread the first time.

    Concurrent first calls each wait in their own thread on the interpreter's import lock,
    so every caller gets the module fully initialised.
    """
    module = _imported.get(module_name)
    if module is None:
        module = await anyio.to_thread.run_sync(importlib.import_module, module_name)
        _imported[module_name] = module
    return module


KNOWN_TRANSPORTS = ("stdio", "http", "sse")


def check_transport(name: str, config: ServerConfig) -> None:
    """Refuse a transport nothing can speak, before anything is spawned or imported.

    Discovery only builds the three known ones, but a hand-built ``ServerConfig`` may hold
    any string, which would otherwise fall through to the HTTP path and fail there.
    """
    if config.transport not in KNOWN_TRANSPORTS:
        raise ConnectError(
            f'MCP server "{name}" has unknown transport {config.transport!r}: use "stdio", "http" or "sse"',
            server=name,
        )


async def _new_connection(
    name: str,
    config: ServerConfig,
    *,
    cwd: Path,
    timeout_ms: int | None,
    on_notification: NotificationCallback | None,
    era: EraVerdict | None,
    auth: object | None,
    resolve_secrets: bool,
    elicitation_handler: ElicitationHandler | None,
    sampling_handler: SamplingHandler | None,
    probe_timeout_ms: int | None,
) -> tuple[ServerConnection, StdioTransport | None]:
    """Spawn a stdio server, load the SDK meanwhile, and build its (not yet started) connection."""
    check_transport(name, config)
    stdio: StdioTransport | None = None
    if config.transport == "stdio":
        stdio = await prepare_stdio_transport(name, config, cwd=cwd, resolve_secrets=resolve_secrets)
        await stdio.spawn()
    try:
        module = await import_off_loop(CONNECTION_MODULE)
    except BaseException:
        if stdio is not None:
            await stdio.discard()
        raise
    connection: ServerConnection = module.ServerConnection(
        name,
        config,
        cwd=cwd,
        timeout_ms=timeout_ms,
        on_notification=on_notification,
        era=era,
        auth=auth,
        resolve_secrets=resolve_secrets,
        elicitation_handler=elicitation_handler,
        sampling_handler=sampling_handler,
        probe_timeout_ms=module.DEFAULT_PROBE_TIMEOUT_MS if probe_timeout_ms is None else probe_timeout_ms,
        stdio_transport=stdio,
    )
    return connection, stdio


async def open_connection(
    task_group: anyio.abc.TaskGroup,
    name: str,
    config: ServerConfig,
    *,
    cwd: Path,
    timeout_ms: int | None = None,
    on_notification: NotificationCallback | None = None,
    era: EraVerdict | None = None,
    auth: object | None = None,
    resolve_secrets: bool = True,
    elicitation_handler: ElicitationHandler | None = None,
    sampling_handler: SamplingHandler | None = None,
    probe_timeout_ms: int | None = None,
) -> ServerConnection:
    """Connect ``name`` with its owner task hosted in ``task_group`` (which must outlive the
    connection). Returns once the handshake is done; otherwise raises the connect error with
    nothing left running.

    The handshake is bounded by ``timeout_ms``, else the config's timeout (default 30 000 ms;
    0 = unbounded). ``era`` is the verdict remembered from an earlier contact (the connection's
    ``era_verdict``): with it nothing is probed (``initialize`` for a legacy server, the
    remembered ``DiscoverResult`` adopted for a 2026-07-28 one) and a server that refuses it
    raises ``EraMismatchError``; without it ``server/discover`` is probed, bounded by
    ``probe_timeout_ms`` (default 1000), then ``initialize`` if it is not answered. ``auth`` (an
    ``httpx2.Auth``) is used for HTTP servers. ``resolve_secrets=False`` (unapproved entries)
    skips ``!command`` and environment-name substitution. ``elicitation_handler`` and
    ``sampling_handler`` answer ``elicitation/create`` and ``sampling/createMessage``, whether
    the server sends them as requests (legacy) or inside an ``input_required`` result.
    """
    connection, stdio = await _new_connection(
        name,
        config,
        cwd=cwd,
        timeout_ms=timeout_ms,
        on_notification=on_notification,
        era=era,
        auth=auth,
        resolve_secrets=resolve_secrets,
        elicitation_handler=elicitation_handler,
        sampling_handler=sampling_handler,
        probe_timeout_ms=probe_timeout_ms,
    )
    try:
        await task_group.start(_run_owner, connection, name=f"mcpfleet connection {name}")
    except BaseException:
        # The owner reaps what it entered; a process it never took over is ended here.
        if stdio is not None and stdio.returncode is None:
            await stdio.discard()
        raise
    return connection


async def _run_owner(
    connection: ServerConnection, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    await connection.run_owner(task_status=task_status)


async def connect_to_server(
    name: str,
    config: ServerConfig,
    *,
    cwd: Path,
    timeout_ms: int | None = None,
    on_notification: NotificationCallback | None = None,
    era: EraVerdict | None = None,
    auth: object | None = None,
    resolve_secrets: bool = True,
    elicitation_handler: ElicitationHandler | None = None,
    sampling_handler: SamplingHandler | None = None,
    probe_timeout_ms: int | None = None,
) -> ServerConnection:
    """``open_connection`` without a task group: the owner runs in an asyncio task of its own.

    anyio offers no way to start a task that outlives the caller without a task group the
    caller already holds, so this convenience needs the asyncio backend; code running on
    another backend (or wanting structured ownership) uses ``open_connection``.
    """
    import asyncio

    connection, stdio = await _new_connection(
        name,
        config,
        cwd=cwd,
        timeout_ms=timeout_ms,
        on_notification=on_notification,
        era=era,
        auth=auth,
        resolve_secrets=resolve_secrets,
        elicitation_handler=elicitation_handler,
        sampling_handler=sampling_handler,
        probe_timeout_ms=probe_timeout_ms,
    )
    ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    owner = asyncio.create_task(connection.run_owner(task_status=_FutureTaskStatus(ready)))
    # The connection keeps its host task referenced: asyncio holds tasks only weakly.
    connection.host_task = owner
    try:
        await asyncio.wait({owner, ready}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            owner.result()  # the connect error
    except BaseException:
        owner.cancel()
        await asyncio.wait({owner})
        # An owner cancelled before it took the process over leaves it to us.
        if stdio is not None and stdio.returncode is None:
            await stdio.discard()
        raise
    return connection


class _FutureTaskStatus(anyio.abc.TaskStatus[None]):
    def __init__(self, future: Any) -> None:
        self._future = future

    def started(self, value: None = None) -> None:
        if not self._future.done():
            self._future.set_result(None)
