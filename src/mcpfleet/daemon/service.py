"""The daemon process: one shared fleet served to every host session of the user.

``run_daemon`` is ``mcpfleet daemon run``, what the shim starts (detached) when no daemon
answers. It logs to a rotated file (``daemon.logs``), binds the socket of the runtime folder
(0600 in a 0700 folder, ``daemon_client.paths``), holds one ``SharedFleet`` and serves, until it
is stopped, every connection made to the socket:

* **Who.** Before a byte is read, the peer's uid (``SO_PEERCRED``, ``daemon_client.peer``) must be
  the daemon's own; any other peer is closed without an answer, and logged.
* **The hello.** The first line (at most ``wire.MAX_HELLO_BYTES``, within
  ``HELLO_TIMEOUT_S``) says what the connection is (``wire.parse_hello``). It is refused
  (one answer line, then the connection closes) when it is not a hello (``bad-hello``), when
  the client runs another mcpfleet version or protocol (``version-mismatch``: the daemon
  also starts to drain, so that the client can start a daemon of its own version), when the
  daemon is draining (``draining``), or when the client reads other config files than the
  daemon does (``environment-mismatch``: the folders ``wire.CONFIG_ENVIRONMENT`` names
  differ, after defaults and real paths).
* **The values.** The daemon asks the client for the variables its fleet's configs
  reference (``wire.needs``) and resolves the connection's entries with those and the
  hello's base alone (``Client.environment``): never its own environment, which is the fixed
  base only (``scrub_environment``).
* **A session** is a host's MCP connection: a view of the shared fleet for the session's
  project and options (``SharedFleet.attach``), served by a gateway of its own (the same
  ``Gateway`` and ``build_server`` as ``mcpfleet serve --no-daemon``) on the socket, one
  JSON-RPC message per line (``gateway.stdio.wire_streams``), until the shim closes it; a
  plain ``tools/call`` goes from the shim's line straight to its backend's pipe and back
  (``gateway.fast_path``), with no task of its own and no SDK server between. The
  hello is answered once the gateway is up, so a session the fleet cannot serve (a project
  entry that breaks a rule, a name two servers share under ``--prefix none``) is refused
  with the reason instead of accepted and dropped.
* **A control connection** carries the operations of ``wire.CONTROL_OPS``
  (``daemon.control``), each answered by id, concurrently.
* **The dashboard** (``daemon.dashboard``, docs/ui.md) starts on the first ``ui`` operation,
  in the daemon's task group, on a loopback port, and serves until the daemon stops; every
  session's gateway tells it of each call that leaves it (for its plots).

It stops, closing every server within the fleet's shutdown deadline, on SIGTERM or SIGINT,
on the ``stop`` operation, after ``daemon_idle_timeout_s`` with no connection at all, or,
once draining, when its last connection ends. Draining closes the socket and removes its
file (only if it is still this daemon's: a new daemon may already have bound the path), then
serves the sessions it has until they end. Its sessions' sockets close with it, and their
shims reconnect to a new daemon.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import logging
import os
import signal
import socket
import stat
import time
from collections.abc import AsyncIterator, Callable, Coroutine, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.to_thread

from mcpfleet import __version__
from mcpfleet.contract import wire
from mcpfleet.daemon.dashboard import DaemonDashboard
from mcpfleet.daemon.socket_io import receive, send_all
from mcpfleet.daemon_client import paths
from mcpfleet.daemon_client.peer import peer_credentials
from mcpfleet.errors import ConfigError, DaemonError, first_leaf
from mcpfleet.fleet.memory import process_tree, resident_bytes

if TYPE_CHECKING:
    from mcpfleet.config.profiles import DaemonSettings
    from mcpfleet.daemon.fleet import SharedFleet
    from mcpfleet.daemon.view import FleetView

logger = logging.getLogger(__name__)


HELLO_TIMEOUT_S = 10.0
"""How long a connection has to send its hello before it is closed."""
LISTEN_BACKLOG = 128
"""Connections the kernel queues before the daemon accepts them: ten shims at once fit."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class DaemonAlreadyRunning(DaemonError, RuntimeError):
    """Another daemon answers on the socket; this one does not start."""


def utc_text(timestamp: float) -> str:
    """A wall-clock time as the daemon's documents give it: ISO 8601, UTC, whole seconds."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


# -- the socket ---------------------------------------------------------------------------------------


class DaemonSocket:
    """The listening socket at ``paths.socket_path()``, and the file it is bound to.

    Bound under a temporary name, then linked to its path (``link`` never replaces an existing
    file), so two daemons starting at once cannot both own the path. The file's identity is
    kept: ``close`` removes the path only while it still names this socket.
    """

    def __init__(self, listener: socket.socket, path: Path) -> None:
        self.listener = listener
        self.path = path
        info = os.lstat(path)
        self._identity = (info.st_dev, info.st_ino)
        self.closed = False

    @classmethod
    def bind(cls, path: Path) -> DaemonSocket:
        """Bind and listen; ``DaemonAlreadyRunning`` when a daemon answers on ``path``."""
        if _answers(path):
            raise DaemonAlreadyRunning(
                f"a daemon already answers on {path}; `mcpfleet daemon status` shows it, "
                "`mcpfleet daemon stop` stops it"
            )
        # Short: the socket path's length limit holds for this name too.
        temporary = path.with_name(f".{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            previous_umask = os.umask(0o177)
            try:
                listener.bind(os.fsencode(temporary))
            finally:
                os.umask(previous_umask)
            try:
                os.chmod(temporary, paths.SOCKET_MODE)
                listener.listen(LISTEN_BACKLOG)
                _link_no_clobber(temporary, path)
            finally:
                os.unlink(temporary)
            listener.setblocking(False)
            return cls(listener, path)
        except BaseException:
            listener.close()
            raise

    def owns_path(self) -> bool:
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return False
        return stat.S_ISSOCK(info.st_mode) and (info.st_dev, info.st_ino) == self._identity

    def close(self) -> None:
        """Stop listening and remove the path if it is still this socket's. Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self.owns_path():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        self.listener.close()


def _link_no_clobber(source: Path, target: Path) -> None:
    """``link(source, target)``; a stale socket at ``target`` (nobody answers) is replaced."""
    try:
        os.link(source, target)
        return
    except FileExistsError:
        pass
    if _answers(target):
        raise DaemonAlreadyRunning(f"a daemon already answers on {target}")
    info = os.lstat(target)
    if not stat.S_ISSOCK(info.st_mode):
        raise DaemonAlreadyRunning(f"{target} exists and is not a socket; remove it")
    logger.info("replacing the stale socket %s", target)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(target)
    os.link(source, target)


def _answers(path: Path) -> bool:
    """Whether something accepts connections on the socket at ``path``."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        probe.connect(os.fsencode(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


# -- connections --------------------------------------------------------------------------------------


@dataclass(eq=False)
class Client:
    """One accepted connection: greeting (no hello taken yet), then a session or a control one.

    A connection counts as activity from the moment it is accepted: a daemon about to stop
    for being idle does not drop a shim whose hello is on its way.
    """

    number: int
    pid: int
    """The peer's, from the kernel; the hello's own when it gives one."""
    kind: wire.ConnectionKind | None = None
    host: str | None = None
    since: float = field(default_factory=time.time)
    project: str | None = None
    """A session's project folder (its ``cwd``, resolved)."""
    environment: dict[str, str] = field(default_factory=dict)
    """What the client sent of its environment (the hello's base and config folders, and the
    values the daemon asked for): what its fleet's entries are resolved with."""

    @property
    def id(self) -> str:
        """``s3`` for the third connection when it is a session, ``c3`` otherwise."""
        return f"{'s' if self.kind == 'session' else 'c'}{self.number}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "host": self.host,
            "project": self.project,
            "since": utc_text(self.since),
            "pid": self.pid,
        }


class HelloRefused(DaemonError):
    """A hello the daemon answers with a refusal (``code`` from ``wire.REFUSAL_CODES``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class DaemonService:
    """The daemon's connections, its idle clock and its stop; the fleet is ``fleet``'s."""

    def __init__(
        self,
        fleet: SharedFleet,
        daemon_socket: DaemonSocket,
        *,
        daemon_idle_timeout_s: float,
    ) -> None:
        self.fleet = fleet
        self.socket = daemon_socket
        self.daemon_idle_timeout_s = daemon_idle_timeout_s
        self.pid = os.getpid()
        self.started = time.time()
        self.config_folders = wire.config_folders(os.environ)
        self.clients: dict[int, Client] = {}
        self.draining = False
        self._ids = itertools.count(1)
        self._stop = anyio.Event()
        self._clients_changed = anyio.Event()
        self._idle_since = time.monotonic()
        """Since when no connection is open (the daemon's idle clock)."""
        self._accepting: anyio.CancelScope | None = None
        self._read_settings: Callable[[], DaemonSettings] | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self.dashboard = DaemonDashboard(self)

    # -- lifetime -----------------------------------------------------------------------------------

    async def serve(self) -> None:
        """Accept and serve connections until the daemon stops; every connection is closed then."""
        async with anyio.create_task_group() as task_group:
            self._task_group = task_group
            task_group.start_soon(self._accept_loop, task_group)
            task_group.start_soon(self._stop_when_idle)
            task_group.start_soon(self._stop_on_signal)
            if self._read_settings is not None:
                task_group.start_soon(self._follow_settings, self._read_settings)
            await self._stop.wait()
            task_group.cancel_scope.cancel()
        self.socket.close()

    def stop(self, reason: str) -> None:
        if not self._stop.is_set():
            logger.info("stopping: %s", reason)
            self._stop.set()

    def drain(self, reason: str) -> None:
        """Take no new connection; stop once the current ones have ended.

        The idle watch is not woken here: the connection whose hello began the drain is one
        of the current ones, and its refusal goes out before it ends.
        """
        if self.draining:
            return
        logger.info(
            "draining (%s): the socket is closed, %d connection(s) served until they end",
            reason,
            len(self.clients),
        )
        self.draining = True
        if self._accepting is not None:
            self._accepting.cancel()
        # The accept loop may be waiting on the listener: it is told before the descriptor goes.
        anyio.notify_closing(self.socket.listener)
        self.socket.close()

    @property
    def sessions(self) -> list[Client]:
        return [client for client in self.clients.values() if client.kind == "session"]

    def ping_document(self) -> dict[str, Any]:
        return {"pid": self.pid, "version": __version__, "since": utc_text(self.started)}

    def status_document(self) -> dict[str, Any]:
        """``daemon status --json``: this daemon, its sessions, its servers, and what they cost."""
        servers = self.fleet.status()
        own_rss = resident_bytes(self.pid) or 0
        # Every process there is under the daemon: its watchdog, its servers, what they started.
        tree = process_tree(self.pid)
        return {
            **self.ping_document(),
            "socket": str(self.socket.path),
            "log": str(paths.log_path()),
            "draining": self.draining,
            "rss_bytes": own_rss,
            "sessions": [client.to_json() for client in self.sessions],
            "controls": sum(1 for client in self.clients.values() if client.kind == "control"),
            "servers": servers,
            "errors": self.fleet.config_errors(),
            "totals": {
                "processes": tree.processes if tree is not None else 1,
                "rss_bytes": tree.rss_bytes if tree is not None else own_rss,
            },
        }

    async def _stop_on_signal(self) -> None:
        with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:
            async for received in signals:
                self.stop(f"{signal.Signals(received).name} received")
                return

    async def _stop_when_idle(self) -> None:
        """Stop after ``daemon_idle_timeout_s`` without any connection, or, draining, at once.
        The timeout is read at each turn: an edit of the setting applies to the wait under way."""
        while True:
            changed = self._clients_changed
            if not self.clients:
                if self.draining:
                    self.stop("drained: the last connection ended")
                    return
                remaining = self._idle_since + self.daemon_idle_timeout_s - time.monotonic()
                if remaining <= 0:
                    self.stop(f"idle: no connection for {self.daemon_idle_timeout_s:g} s")
                    return
                with anyio.move_on_after(remaining):
                    await changed.wait()
            else:
                await changed.wait()

    def _note_clients_changed(self) -> None:
        if not self.clients:
            self._idle_since = time.monotonic()
        self._wake_idle_watch()

    def _wake_idle_watch(self) -> None:
        self._clients_changed.set()
        self._clients_changed = anyio.Event()

    # -- settings -----------------------------------------------------------------------------------

    def follow_settings(self, read: Callable[[], DaemonSettings]) -> None:
        """Have ``serve`` re-read the daemon's settings with ``read`` whenever mcpfleet's user
        config changes, and apply them (``apply_settings``)."""
        self._read_settings = read

    def apply_settings(self, settings: DaemonSettings) -> None:
        """Both timeouts as edited: the idle stops of servers and the daemon's own idle wait
        follow at once, each counted from when its idleness began."""
        if settings == self.fleet.settings and settings.daemon_idle_timeout_s == self.daemon_idle_timeout_s:
            return
        logger.info(
            "daemon settings changed: idleTimeout %g s, daemonIdleTimeout %g s",
            settings.idle_timeout_s,
            settings.daemon_idle_timeout_s,
        )
        self.fleet.apply_settings(settings)
        self.daemon_idle_timeout_s = settings.daemon_idle_timeout_s
        self._wake_idle_watch()

    async def _follow_settings(self, read: Callable[[], DaemonSettings]) -> None:
        from mcpfleet.fleet import settings as defaults
        from mcpfleet.fleet.reload import ConfigWatcher
        from mcpfleet.paths import user_config_file

        async def reread() -> None:
            try:
                settings = await anyio.to_thread.run_sync(read)
            except ConfigError as error:
                logger.warning("daemon settings kept as they were: %s", error)
                return
            self.apply_settings(settings)

        watcher = ConfigWatcher(defaults.WATCH_INTERVAL_S)
        watcher.watch([str(user_config_file())])
        await watcher.run(reread)

    def spawn(self, function: Callable[..., Coroutine[Any, Any, object]], *args: object) -> None:
        """Run ``function(*args)`` in the daemon's task group (an action of its dashboard)."""
        assert self._task_group is not None, "the daemon serves"
        self._task_group.start_soon(function, *args)

    async def start_task(self, function: Callable[..., Coroutine[Any, Any, object]], *args: object) -> Any:
        assert self._task_group is not None, "the daemon serves"
        return await self._task_group.start(function, *args)

    def held_by(self, host: str) -> contextlib.AbstractAsyncContextManager[Client]:
        """A connection of the daemon's own (an open dashboard page): the daemon is not idle."""
        return self._registered(Client(number=next(self._ids), pid=self.pid, kind="control", host=host))

    @asynccontextmanager
    async def _registered(self, client: Client) -> AsyncIterator[Client]:
        self.clients[client.number] = client
        self._note_clients_changed()
        try:
            yield client
        finally:
            del self.clients[client.number]
            self._note_clients_changed()

    # -- accepting ----------------------------------------------------------------------------------

    async def _accept_loop(self, task_group: anyio.abc.TaskGroup) -> None:
        listener = self.socket.listener
        with anyio.CancelScope() as self._accepting:
            while not self.draining:
                try:
                    connection, _ = listener.accept()
                except BlockingIOError:
                    try:
                        await anyio.wait_readable(listener)
                    except anyio.ClosedResourceError:
                        return  # drained: the listener was closed under the wait
                    continue
                except OSError as error:
                    if error.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        # Out of descriptors: the pending connection waits in the backlog a moment.
                        logger.warning("cannot accept a connection now: %s", error)
                        await anyio.sleep(0.1)
                        continue
                    raise
                task_group.start_soon(self._handle, connection)

    async def _handle(self, connection: socket.socket) -> None:
        """One connection, from the peer check to its end; nothing it does can stop the daemon."""
        with connection:
            try:
                await self._serve_connection(connection)
            except Exception:
                logger.exception("a connection failed")

    async def _serve_connection(self, connection: socket.socket) -> None:
        credentials = peer_credentials(connection)
        if not credentials.same_user:
            logger.warning(
                "refused a connection from uid %d (pid %d): only uid %d may use this daemon",
                credentials.uid,
                credentials.pid,
                os.getuid(),
            )
            return
        connection.setblocking(False)
        async with self._registered(Client(number=next(self._ids), pid=credentials.pid)) as client:
            received: tuple[bytes, bytes] | None = None
            with anyio.move_on_after(HELLO_TIMEOUT_S):
                received = await _read_hello(connection)
            if received is None:
                logger.info("pid %d connected and sent no hello", credentials.pid)
                return
            try:
                line, already_read = received
                hello = self._take_hello(line)
            except HelloRefused as refusal:
                logger.warning("refused pid %d (%s): %s", credentials.pid, refusal.code, refusal.message)
                await send_all(connection, wire.refused(refusal.code, refusal.message))
                return
            client.kind, client.host, client.since = hello.kind, hello.host, time.time()
            client.pid = hello.pid or client.pid
            values = await self._ask_values(connection, hello, already_read)
            if values is None:
                logger.info("pid %d did not send the values the daemon asked for", credentials.pid)
                return
            client.environment, already_read = values
            if hello.kind == "session":
                assert hello.fleet is not None, "parse_hello requires a session's fleet"
                client.project = str(await anyio.Path(hello.fleet.cwd).resolve())
                await self._serve_session(connection, client, hello.fleet, already_read)
            else:
                from mcpfleet.daemon.control import serve_control

                await send_all(connection, self._accepted(client))
                await serve_control(self, connection, client, already_read)

    def _take_hello(self, line: bytes) -> wire.Hello:
        """The hello in ``line``, or the refusal it gets."""
        try:
            document = wire.decode_line(line, limit=wire.MAX_HELLO_BYTES)
        except wire.WireError as error:
            raise HelloRefused("bad-hello", str(error)) from None
        # Checked before the rest of the shape: another version may shape its hello otherwise.
        protocol, version = document.get("mcpfleet"), document.get("version")
        if (protocol, version) != (wire.PROTOCOL, __version__) and isinstance(version, str):
            self.drain(f"a client of mcpfleet {version} connected")
            raise HelloRefused(
                "version-mismatch",
                f"this daemon runs mcpfleet {__version__} (protocol {wire.PROTOCOL}), the client "
                f"{version} (protocol {protocol}); the daemon drains and exits: start a new one",
            )
        try:
            hello = wire.parse_hello(document)
        except wire.WireError as error:
            raise HelloRefused("bad-hello", str(error)) from None
        if self.draining:
            raise HelloRefused("draining", "this daemon is stopping; start a new one")
        folders = wire.config_folders(hello.env)
        differing = [name for name in wire.CONFIG_ENVIRONMENT if folders[name] != self.config_folders[name]]
        if differing:
            raise HelloRefused(
                "environment-mismatch",
                f"the client's {', '.join(differing)} differ from the daemon's: it reads other config "
                "files, so it is not served from this daemon's fleet",
            )
        return hello

    async def _ask_values(
        self, connection: socket.socket, hello: wire.Hello, already_read: bytes
    ) -> tuple[dict[str, str], bytes] | None:
        """The connection's environment: the hello's base and config folders, and the values
        of the variables its fleet's configs reference, asked for when the hello lacks them;
        with the bytes read after the client's answer. None when the client does not answer."""
        environment = wire.hello_environment(hello.env)
        missing = sorted(set(await self.fleet.variables_of(hello.fleet)) - environment.keys())
        if not missing:
            return environment, already_read
        await send_all(connection, wire.needs(missing))
        received: tuple[bytes, bytes] | None = None
        with anyio.move_on_after(HELLO_TIMEOUT_S):
            received = await _read_hello(connection, already_read)
        if received is None:
            return None
        line, rest = received
        try:
            environment.update(wire.parse_env_values(line, missing))
        except wire.WireError as error:
            await send_all(connection, wire.refused("bad-hello", f"the answer to the daemon's need: {error}"))
            return None
        return environment, rest

    def _accepted(self, client: Client) -> bytes:
        return wire.accepted(pid=self.pid, version=__version__, session=client.id)

    # -- sessions -----------------------------------------------------------------------------------

    async def _serve_session(
        self, connection: socket.socket, client: Client, spec: wire.FleetSpec, already_read: bytes
    ) -> None:
        """Serve one host session: a gateway over the session's view of the fleet, on ``connection``."""
        from mcpfleet.client.opening import import_off_loop
        from mcpfleet.gateway.stdio import wire_streams

        serving = await import_off_loop("mcpfleet.gateway.handlers")
        from mcpfleet.gateway.fast_path import FastPath

        logger.info("session %s: %s (pid %s) in %s", client.id, client.host or "a host", client.pid, spec.cwd)
        answered = False
        try:
            async with self._session_gateway(spec, client) as gateway:
                server = serving.build_server(gateway)
                await send_all(connection, self._accepted(client))
                answered = True
                fd = connection.fileno()
                # The shim's lines go straight into the gateway's request path: a plain
                # tools/call is parsed once and written to its backend's pipe from this read
                # loop, its answer written to the socket from the backend's (no task, no SDK
                # server between); anything else goes to the SDK's server as before.
                async with wire_streams(
                    fd,
                    fd,
                    labels=("socket", "socket"),
                    already_read=already_read,
                    fast_path=FastPath(gateway),
                ) as (reads, writes):
                    await server.run(reads, writes, serving.initialization_options(server))
        except Exception as error:
            if answered:
                raise
            leaf = first_leaf(error)
            reason = str(leaf) or type(leaf).__name__
            logger.warning("session %s refused: %s", client.id, reason)
            await send_all(connection, wire.refused("refused", reason))
            return
        logger.info("session %s ended", client.id)

    @asynccontextmanager
    async def _session_gateway(self, spec: wire.FleetSpec, client: Client) -> AsyncIterator[Any]:
        from mcpfleet.gateway.assembly import GatewayOptions, open_gateway
        from mcpfleet.gateway.relay import Relay

        # mcpfleet's user config is read once per session, as `serve --no-daemon` reads it once:
        # a profile added while the daemon runs is found, and the view gets the very profile
        # the budget has.
        options = GatewayOptions.read(
            tools=spec.tools,
            max_tools=spec.max_tools,
            profile=spec.profile,
            prefix=spec.prefix,
            max_name_length=spec.max_name_length,
            startup_timeout_ms=spec.startup_timeout_ms,
        )

        def session_view(relay: Relay) -> contextlib.AbstractAsyncContextManager[FleetView]:
            return self.fleet.attach(
                spec,
                session_id=client.id,
                host=client.host,
                profile=options.budget.profile,
                relay=relay,
                environment=client.environment,
            )

        async with open_gateway(session_view, options) as gateway:
            gateway.relay.flights.observer = self.dashboard.source.record_flight
            yield gateway


async def _read_hello(connection: socket.socket, already_read: bytes = b"") -> tuple[bytes, bytes] | None:
    """The hello line (without its newline) and the bytes read after it (the start of what
    follows: a client may send its first messages right behind its hello); None when the peer
    closes first. A line over the limit is cut there (its parsing then says it is too long).
    ``already_read``: bytes of the connection read before, where the line starts."""
    received = bytearray(already_read)
    end = received.find(b"\n")
    if end >= 0:
        return bytes(received[:end]), bytes(received[end + 1 :])
    while True:
        chunk = await receive(connection)
        if not chunk:
            return None
        searched = len(received)
        received += chunk
        end = received.find(b"\n", searched)
        if end >= 0:
            return bytes(received[:end]), bytes(received[end + 1 :])
        if len(received) > wire.MAX_HELLO_BYTES:
            return bytes(received), b""


# -- the process --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DaemonOptions:
    """``daemon run``'s options: overrides of the ``daemon`` settings of mcpfleet's user config."""

    idle_timeout_s: float | None = None
    daemon_idle_timeout_s: float | None = None
    verbose: int = 0


class DaemonNotStarted(DaemonError):
    """``daemon run`` could not begin serving: its log or its socket is unusable. The message
    says why and what to do; the command line prints it (the daemon has no terminal of its
    own to write to)."""


def run_daemon(options: DaemonOptions) -> None:
    """``mcpfleet daemon run``: serve until stopped; ``DaemonNotStarted`` if it cannot begin."""
    from mcpfleet.config.gateway_entry import mark_gateway_environment
    from mcpfleet.daemon.logs import log_to_file

    # First: nothing the daemon starts (a server, a `!command`) may see the environment of
    # whichever host's shim started it.
    scrub_environment(os.environ)
    try:
        log_to_file(paths.log_path(), level=logging.DEBUG if options.verbose else logging.INFO)
    except OSError as error:
        raise DaemonNotStarted(
            f"daemon not started: cannot open its log {paths.log_path()} ({error.strerror or error}); "
            "make that folder writable, or set MCPFLEET_HOME to a folder you can write"
        ) from None
    try:
        paths.ensure_runtime_dir()
        daemon_socket = DaemonSocket.bind(paths.socket_path())
    except (paths.RuntimeFolderError, DaemonAlreadyRunning) as error:
        logger.error("not started: %s", error)
        raise DaemonNotStarted(f"daemon not started: {error}") from None
    logger.info("mcpfleet %s daemon (pid %d) serving on %s", __version__, os.getpid(), daemon_socket.path)
    # Backends inherit the mark: a `mcpfleet serve` that one of them starts refuses to serve
    # this fleet back into itself.
    mark_gateway_environment(os.environ)
    _start_telemetry()
    try:
        anyio.run(_run, daemon_socket, options)
    finally:
        daemon_socket.close()
        logger.info("daemon (pid %d) stopped", os.getpid())


def _start_telemetry() -> None:
    """The telemetry the ``OTEL_*`` variables ask for (``mcpfleet.telemetry``), then those
    variables out of the environment: an exporter's headers may hold a key, no backend's
    business. A value it cannot honour is logged, and the daemon serves without telemetry
    rather than not at all (its hosts' servers matter more)."""
    from mcpfleet import telemetry
    from mcpfleet.daemon_client.launch import OTEL_PREFIX

    try:
        telemetry.start("daemon")
    except ConfigError as error:
        logger.error("telemetry off: %s", error)
    for name in [name for name in os.environ if name.startswith(OTEL_PREFIX)]:
        del os.environ[name]


def scrub_environment(environ: MutableMapping[str, str]) -> None:
    """Keep of ``environ`` only what the daemon itself needs (``launch.daemon_environment``:
    the fixed base, the config folders' variables, the runtime folder's override)."""
    from mcpfleet.daemon_client.launch import daemon_environment

    kept = daemon_environment(environ)
    for name in [name for name in environ if name not in kept]:
        del environ[name]


async def _run(daemon_socket: DaemonSocket, options: DaemonOptions) -> None:
    from mcpfleet.daemon.fleet import SharedFleet

    settings = daemon_settings(options)
    async with SharedFleet(settings) as fleet:
        service = DaemonService(fleet, daemon_socket, daemon_idle_timeout_s=settings.daemon_idle_timeout_s)
        service.follow_settings(lambda: daemon_settings(options))
        await service.serve()


def daemon_settings(options: DaemonOptions) -> DaemonSettings:
    """The ``daemon`` settings of mcpfleet's user config as the file says now, with ``daemon
    run``'s options over them (they win over any edit); ``ConfigError`` for a bad file."""
    from mcpfleet.config.profiles import read_gateway_settings

    settings = read_gateway_settings().daemon
    if options.idle_timeout_s is not None:
        settings = dataclasses.replace(settings, idle_timeout_s=options.idle_timeout_s)
    if options.daemon_idle_timeout_s is not None:
        settings = dataclasses.replace(settings, daemon_idle_timeout_s=options.daemon_idle_timeout_s)
    return settings
