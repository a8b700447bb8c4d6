"""How a connection starts without making anyone wait for the SDK first, and who holds it.

Importing the SDK (``mcp``) takes about 0.6 s. Done on the event loop, the import would
stall every timer (the start-up gate among them) and every other server's spawn; done
before spawning, it would add to every cold start. So a stdio server is spawned first,
by code that needs no SDK, the SDK is imported in a worker thread while the child
boots, and only then does the connection's owner task take over the running process.

The owner task always runs in a task group that someone holds for the connection's life:
``open_connection(task_group, …)`` uses the caller's (the manager's, for all its servers);
``connect_to_server(…)`` is an ``async with`` block with a task group of its own. Either way
any task may use or close the connection while it is held.

Secrets are resolved here, on the client side: the transport receives the stdio server's
environment ready-made.

This module imports nothing of the SDK; ``mcpfleet.client.connection`` does.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread

from mcpfleet.client.options import ConnectionOptions, connection_options
from mcpfleet.client.secrets import resolve_secrets_off_loop
from mcpfleet.errors import ConnectError
from mcpfleet.transport.process import ServerProcess
from mcpfleet.transport.stdio import StdioTransport

if TYPE_CHECKING:
    from mcpfleet.client.connection import ServerConnection
    from mcpfleet.config.model import ServerConfig

CONNECTION_MODULE = "mcpfleet.client.connection"


_imported: dict[str, ModuleType] = {}
"""Modules whose import has completed. ``sys.modules`` is no such record: it also holds a
module that another thread is still importing, half initialised."""


_import_lock = threading.Lock()
"""Held by the worker thread that imports: one first import at a time. Two threads importing
different modules that import each other (the SDK's client and server halves do) can meet
the interpreter's deadlock detection, which hands one of them a half-initialised module."""


async def import_off_loop(module_name: str) -> ModuleType:
    """A module that imports the SDK, imported in a worker thread the first time.

    First imports run one after another (``_import_lock``), so every caller gets the module
    fully initialised, whichever other SDK modules are being imported at the same time.
    """
    # Once imported, no worker thread: the module is at hand.
    module = _imported.get(module_name)
    return module if module is not None else await anyio.to_thread.run_sync(import_now, module_name)


def import_now(module_name: str) -> ModuleType:
    """A module that imports the SDK, imported here and now, for callers that know every use
    of theirs connects a server and would rather pay for the SDK with their own imports than
    on their first connection (where it delays every handshake behind it)."""
    module = _imported.get(module_name)
    if module is None:
        module = _imported[module_name] = _import_serially(module_name)
    return module


def _import_serially(module_name: str) -> ModuleType:
    with _import_lock:
        return importlib.import_module(module_name)


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


async def prepare_stdio_transport(
    name: str, config: ServerConfig, *, cwd: Path, resolve_secrets: bool
) -> StdioTransport:
    """The transport of a stdio server: the parent's environment plus the config's (secrets
    resolved), in the config's ``cwd`` (relative to ``cwd``), else in ``cwd`` itself.

    Discovery gives every stdio entry its working folder (see ``config/discovery.py``); a
    config built by hand has no level to decide from, so it runs where its builder says: its
    own ``cwd``, else the folder the caller passed. It runs in the config's sandbox
    (``transport/sandbox.py``).
    """
    if not config.command:
        raise ConnectError(f'MCP server "{name}" has no "command"', server=name)
    env = await resolve_secrets_off_loop(
        name, config.env, enabled=resolve_secrets, literal_keys=config.literal_env_keys
    )
    folder = cwd / config.cwd if config.cwd else cwd
    process = ServerProcess(
        name,
        config.command,
        config.args,
        env={**os.environ, **env},
        cwd=str(folder),
        sandbox=config.effective_sandbox,
    )
    return StdioTransport(
        process, max_message_bytes=config.effective_max_message_bytes, max_tools=config.effective_max_tools
    )


async def open_connection(
    task_group: anyio.abc.TaskGroup,
    name: str,
    config: ServerConfig,
    options: ConnectionOptions | None = None,
    /,
    **fields: Any,
) -> ServerConnection:
    """Connect ``name`` with its owner task hosted in ``task_group`` (which must outlive the
    connection). Returns once the handshake is done; otherwise raises the connect error with
    nothing left running.

    How it connects is ``options`` (a ``ConnectionOptions``), or its fields given as keywords
    (``open_connection(group, name, config, cwd=…, timeout_ms=…)``), or both: the keywords
    then replace those fields of ``options``.
    """
    opened_with = connection_options(options, fields)
    check_transport(name, config)
    stdio: StdioTransport | None = None
    if config.transport == "stdio":
        stdio = await prepare_stdio_transport(
            name, config, cwd=opened_with.cwd, resolve_secrets=opened_with.resolve_secrets
        )
        await stdio.process.spawn()
    try:
        module = await import_off_loop(CONNECTION_MODULE)
        connection: ServerConnection = module.ServerConnection(
            name, config, opened_with, stdio_transport=stdio
        )
        await task_group.start(_run_owner, connection, name=f"mcpfleet connection {name}")
    except BaseException:
        # The owner reaps what it entered; a process it never took over is ended here.
        if stdio is not None and stdio.process.returncode is None:
            await stdio.process.discard()
        raise
    return connection


async def _run_owner(
    connection: ServerConnection, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    await connection.run_owner(task_status=task_status)


@asynccontextmanager
async def connect_to_server(
    name: str, config: ServerConfig, options: ConnectionOptions | None = None, /, **fields: Any
) -> AsyncIterator[ServerConnection]:
    """``open_connection`` for the length of an ``async with`` block, whose task group of its
    own hosts the owner: ``async with connect_to_server(name, config, cwd=…) as connection:``
    (the same ``options`` or keywords as ``open_connection``).

    Leaving the block closes the connection (the server's process group is gone on exit),
    even when the block is cancelled. The connect error, and whatever the block raises, come
    out as themselves, not inside an exception group.
    """
    failure: BaseException | None = None
    try:
        async with anyio.create_task_group() as owner_group:
            connection = await open_connection(owner_group, name, config, options, **fields)
            try:
                yield connection
            finally:
                with anyio.CancelScope(shield=True):
                    await connection.close()
    except BaseExceptionGroup as group:
        # The owner never fails once started, so the group holds the one exception of this
        # task (the connect error or the block's own); it is raised below, outside this
        # handler, so it keeps its own context instead of gaining the group's.
        if len(group.exceptions) != 1:
            raise
        failure = group.exceptions[0]
    if failure is not None:
        raise failure


__all__ = [
    "check_transport",
    "connect_to_server",
    "import_now",
    "import_off_loop",
    "open_connection",
    "prepare_stdio_transport",
]
