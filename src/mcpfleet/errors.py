"""Everything that can go wrong in mcpfleet, as one class tree.

The tree is the documentation: catch ``MCPFleetError`` for anything mcpfleet raises,
or a narrower class for one failure. Every message names the server or file involved
and, where there is one, the fix. What is reported rather than raised (a server that did
not start, a config file that could not be read) is a ``Failure``.

Most classes live here; an error that belongs to one module's work lives in that module
(its path beside it below), and still derives from this tree. A class that callers also
catch as a builtin (``ValueError``, ``OSError``…) keeps that base too, shown after ``+``.
``tests/unit/test_error_tree.py`` checks that every exception class under ``src/mcpfleet``
is in the tree and named here::

    MCPFleetError
    ├── ConfigError
    │   ├── ConfigWriteError
    │   │   ├── UnsafeConfigPathError
    │   │   └── PinsTooLargeError           config/pins.py
    │   ├── ApprovalRequiredError
    │   ├── ServeAddressError
    │   ├── EditCheckError                  hosts/documents.py
    │   ├── TeamFileError                   team/loading.py
    │   └── TeamKeyError                    team/sealing.py
    ├── ConnectError
    │   ├── ConnectTimeoutError
    │   ├── EraMismatchError
    │   ├── ServerExitedError
    │   ├── CommandNotFoundError
    │   ├── AuthRequiredError
    │   │   └── ConnectRequiredError        team/connect_flow.py
    │   ├── LoginError
    │   ├── SecretResolutionError
    │   ├── SandboxError
    │   └── ServerReconnectingError
    ├── ConnectionClosedError
    ├── ServerNotConnectedError
    ├── ToolCallError
    ├── RequestError
    ├── ToolNotFoundError
    ├── CacheUnavailableError
    ├── DaemonError
    │   ├── RuntimeFolderError + OSError    daemon_client/paths.py
    │   ├── ForeignDaemon + PermissionError daemon_client/peer.py
    │   ├── WireError + ValueError          contract/wire.py
    │   ├── DaemonStartError + OSError      daemon_client/launch.py
    │   ├── DaemonUnavailable               daemon_client/control.py
    │   │   ├── DaemonRefused               daemon_client/control.py
    │   │   └── DaemonLost                  daemon_client/control.py
    │   ├── OperationFailed                 daemon_client/control.py
    │   ├── ShimError                       daemon_client/shim.py
    │   │   └── Refused                     daemon_client/shim.py
    │   ├── DaemonAlreadyRunning + RuntimeError  daemon/service.py
    │   ├── DaemonNotStarted                daemon/service.py
    │   ├── HelloRefused                    daemon/service.py
    │   ├── ControlError                    daemon/control.py
    │   ├── Ambiguous                       daemon/routing.py
    │   ├── Untied                          daemon/routing.py
    │   ├── DashboardActionError            daemon/dashboard.py
    │   └── NoDaemon                        cli/daemon_commands.py
    ├── AddServerUsageError                 cli/add_server.py
    ├── _CommandLineError                   cli/entry.py
    ├── _UsageError                         cli/slash.py
    ├── CommandFailed                       cli/through_daemon.py
    ├── EntryError + ValueError             config/normalise.py
    ├── SkippedEntry                        config/normalise.py
    ├── _LimitError + ValueError            config/readers.py
    ├── _DuplicateKeyError + ValueError     config/readers.py
    ├── ChangedMeanwhile                    config/writer.py
    ├── JsoncSyntaxError + ValueError       hosts/jsonc.py
    ├── _NotAListing                        transport/listing.py
    ├── PrivateApiMovedError + RuntimeError transport/process.py
    ├── LandlockUnavailableError + RuntimeError  transport/landlock.py
    ├── UnknownNameError                    gateway/core.py
    ├── BackendRejection                    gateway/rejections.py
    ├── GuardRefusal                        gateway/guard.py
    ├── InvalidCursor + ValueError          gateway/paging.py
    ├── ArgumentError + ValueError          dashboard/forms.py
    ├── _ClientGone                         gateway/http.py
    ├── TeamStateError                      team/state.py
    ├── IssuerUnavailable                   team/jwks.py
    ├── TokenRejected                       team/tokens.py
    ├── ApiKeyFileError                     team/api_keys.py
    ├── UnsealError                         team/sealing.py
    ├── AuditWriteError                     team/audit.py
    ├── SignInFailed                        team/ui_signin.py
    └── TeamUiActionError                   team/ui_fleet.py

Not errors, and so outside the tree: ``_Stopped`` (daemon_client/shim.py), which a SIGTERM or
SIGINT raises in the shim's main thread, derives from ``BaseException`` as
``KeyboardInterrupt`` does, so that no ``except Exception`` on the way swallows the stop. And
``ConfinementError`` (transport/landlock_launcher.py): the Landlock launcher is a program of
its own, run with ``python -I -S`` where mcpfleet cannot be imported; its error ends that
program (exit 126, the server never runs) and reaches mcpfleet only as that exit.

This module imports the standard library only: the daemon's stdlib-only side uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FailureKind = Literal["connect", "approval", "invalid", "config", "discovery"]
"""How something failed:

* ``connect``: a server could not be started or reached (subject: the server);
* ``approval``: a project server waits for the user's approval (subject: the server);
* ``invalid``: a server entry cannot be used as written (subject: the server);
* ``config``: a config file could not be read or parsed (subject: the file);
* ``discovery``: discovery itself failed (subject: ``.mcp.json``).
"""

_SERVER_KINDS: frozenset[FailureKind] = frozenset({"connect", "approval", "invalid"})


@dataclass(frozen=True)
class Failure:
    """One thing that could not be loaded, reported without stopping the rest."""

    subject: str
    """The server's name, or the file's path (see ``FailureKind``)."""
    kind: FailureKind
    message: str
    """One line that names the subject and, where there is one, the fix."""

    @property
    def server(self) -> str | None:
        """The server that failed; None for a file or discovery failure."""
        return self.subject if self.kind in _SERVER_KINDS else None

    @property
    def path(self) -> str:
        """The label reports show: ``mcp:<server>`` for a server, else the file."""
        return f"mcp:{self.subject}" if self.kind in _SERVER_KINDS else self.subject

    @property
    def error(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "error": self.message}


def first_leaf(error: BaseException) -> BaseException:
    """The first error inside ``error``'s exception groups (task groups wrap what failed in
    them, in one group per level); ``error`` itself when it is no group."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


class MCPFleetError(Exception):
    """Base class of every error mcpfleet raises on purpose."""


class ConfigError(MCPFleetError):
    """A config file or entry cannot be used.

    ``path`` is the file at fault (when there is one), ``server`` the entry.
    """

    def __init__(self, message: str, *, path: str | None = None, server: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.server = server


class ConfigWriteError(ConfigError):
    """mcpfleet could not edit one of its own config files."""


class UnsafeConfigPathError(ConfigWriteError):
    """mcpfleet refused to edit a file that is a symbolic link or lies outside its folder
    (a link planted in a repository could redirect the edit into another tool's file)."""


class ApprovalRequiredError(ConfigError):
    """A project-level server has not been approved yet, so it is never started."""


class ServeAddressError(ConfigError):
    """``mcpfleet serve --http`` cannot listen where it was asked (malformed, in use, not here),
    or its bearer token cannot be read or cannot travel in a header."""


class ConnectError(MCPFleetError):
    """A connection to one MCP server could not be established."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class ConnectTimeoutError(ConnectError):
    """The handshake did not finish within the server's timeout."""


class EraMismatchError(ConnectError):
    """The server refused the protocol era remembered for it (it was upgraded or downgraded).

    Raised only by a connection that skipped the probe because of a remembered verdict, by
    its handshake or its first request; connecting again without the verdict probes anew.
    """


class ServerExitedError(ConnectError):
    """A stdio server process exited (before or during the session)."""

    def __init__(self, message: str, *, server: str, returncode: int | None = None) -> None:
        super().__init__(message, server=server)
        self.returncode = returncode


class CommandNotFoundError(ConnectError):
    """The command of a stdio server does not exist or cannot be executed."""


class SandboxError(ConnectError):
    """A server meant to run in a sandbox that cannot be confined as asked (no back-end usable
    here, or ``"network": false`` where only Landlock is); the message says how to fix it."""


class AuthRequiredError(ConnectError):
    """An HTTP server needs an OAuth login first (``mcpfleet login NAME``)."""


class LoginError(ConnectError):
    """An OAuth login did not complete: refused, timed out, or its tokens were rejected."""


class SecretResolutionError(ConnectError):
    """A secret substitution (``!command`` or an environment reference) failed."""


class ConnectionClosedError(MCPFleetError):
    """The connection is closed (or was lost) and cannot serve requests."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class ServerReconnectingError(ConnectError):
    """The server's connection was lost and is being re-established; the call may be tried again."""


class ServerNotConnectedError(MCPFleetError):
    """No connection to this server exists and none is in flight."""

    def __init__(self, server: str) -> None:
        super().__init__(f"MCP server not connected: {server}")
        self.server = server


class ToolCallError(MCPFleetError):
    """A tool call failed at the protocol or transport level."""

    def __init__(self, message: str, *, server: str, tool: str) -> None:
        super().__init__(message)
        self.server = server
        self.tool = tool


class RequestError(MCPFleetError):
    """A request other than a tool call (list, read, get, ping) failed or timed out."""

    def __init__(self, message: str, *, server: str, method: str) -> None:
        super().__init__(message)
        self.server = server
        self.method = method


class ToolNotFoundError(MCPFleetError):
    """No active tool has this name."""


class CacheUnavailableError(MCPFleetError):
    """The tool cache file cannot be opened; mcpfleet carries on without a cache.

    ``path`` is the cache file at fault.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class DaemonError(MCPFleetError):
    """The per-user daemon cannot be used for this: its folder or socket cannot be trusted, it
    cannot be reached or started, a line on its socket is not what that side must send, or it
    answered an operation with an error. Whoever asked usually serves in-process instead."""
