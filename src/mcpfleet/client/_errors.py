"""One map from what the SDK and the transports raise to mcpfleet's errors.

Two moments need it. A request on a live connection: ``request_errors`` wraps the SDK call
(a context manager, in the manner of httpx's ``map_httpcore_exceptions``) and turns a
JSON-RPC error, a lost connection, an answer over the size limit, an unusable result or a
missed deadline into one ``ToolCallError``, ``RequestError``, ``ConnectionClosedError`` or
``EraMismatchError``. A handshake that did not finish: ``raise_connect_error`` digs the root
cause out of the exception groups it travelled in and names it (a timeout, a refused
protocol era, an HTTP status, a login needed, a process that exited, a refused handshake).

Every mapped error is raised ``from`` the exception it maps, so a traceback (``-v``) shows the
cause, while the message alone names the server and, where there is one, the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

import anyio
import mcp_types
from mcp import InputRequiredRoundsExceededError
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from mcpfleet.client.definitions import LEGACY_ERA, EraVerdict
from mcpfleet.errors import (
    AuthRequiredError,
    ConnectError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EraMismatchError,
    MCPFleetError,
    RequestError,
    ServerExitedError,
    ToolCallError,
)
from mcpfleet.redaction import redact_url
from mcpfleet.transport.process import exit_description
from mcpfleet.transport.stdio import MESSAGE_TOO_LARGE

if TYPE_CHECKING:
    from mcpfleet.transport.http import HttpTransport
    from mcpfleet.transport.process import ServerProcess

STDERR_TAIL_IN_ERRORS = 5
"""How many of a server's last stderr lines a connect error quotes."""

EraCheck = Callable[[BaseException], EraMismatchError | None]
"""Whether an error says the server refused the protocol era remembered for it."""


@dataclass(frozen=True)
class Asked:
    """What was asked of which server: a tool call (``tool`` set) or another request."""

    server: str
    method: str
    tool: str | None = None

    @property
    def subject(self) -> str:
        return self.tool if self.tool is not None else self.method

    def failure(self, message: str) -> ToolCallError | RequestError:
        if self.tool is not None:
            return ToolCallError(message, server=self.server, tool=self.tool)
        return RequestError(message, server=self.server, method=self.method)


def closed_error(server: str, reason: str | None) -> ConnectionClosedError:
    return ConnectionClosedError(
        f'MCP server "{server}" is not connected: {reason or "not connected"}', server=server
    )


@contextmanager
def request_errors(
    asked: Asked,
    *,
    close_reason: Callable[[], str | None],
    timeout_ms: int | None = None,
    era_check: EraCheck | None = None,
) -> Iterator[None]:
    """Raise what the request inside raised as one mcpfleet error (``request_failure``)."""
    try:
        yield
    except Exception as error:
        failure = request_failure(
            error, asked, close_reason=close_reason, timeout_ms=timeout_ms, era_check=era_check
        )
        if failure is None:
            raise
        raise failure from error


def request_failure(
    error: Exception,
    asked: Asked,
    *,
    close_reason: Callable[[], str | None],
    timeout_ms: int | None = None,
    era_check: EraCheck | None = None,
) -> MCPFleetError | None:
    """The mcpfleet error for what a request raised, ``None`` for an error that stays itself.

    ``close_reason`` says why the connection is gone when the SDK reports it closed;
    ``timeout_ms`` is the bound of a ``TimeoutError`` raised inside (``None``: not ours to
    map); ``era_check`` is given while the remembered era is not yet confirmed. A hot path
    calls this from its own ``except`` (nothing to set up when the request succeeds);
    ``request_errors`` wraps it as a context manager.
    """
    server = asked.server
    if isinstance(error, TimeoutError):
        if timeout_ms is None:
            return None
        return asked.failure(f'MCP server "{server}" did not answer {asked.method} within {timeout_ms}ms')
    if isinstance(error, MCPError):
        if error.code == mcp_types.CONNECTION_CLOSED:
            return closed_error(server, close_reason())
        if error.code == MESSAGE_TOO_LARGE:
            return asked.failure(f"The answer to {asked.subject} was dropped: {error.error.message}")
        mismatch = era_check(error) if era_check is not None else None
        if mismatch is not None:
            return mismatch
        rejected = f"the call to {asked.tool}" if asked.tool is not None else asked.method
        return asked.failure(f'MCP server "{server}" rejected {rejected}: {error.error.message}')
    if isinstance(error, InputRequiredRoundsExceededError):
        abandoned = "call" if asked.tool is not None else "request"
        return asked.failure(
            f'MCP server "{server}" still asked for input after {error.max_rounds} rounds of '
            f"answers to {asked.subject}; the {abandoned} was abandoned"
        )
    if isinstance(error, RuntimeError | ValidationError):
        if asked.tool is not None:
            unusable = f"returned an unusable result for {asked.tool}"
        else:
            unusable = f"answered {asked.method} with an unusable result"
        return asked.failure(f'MCP server "{server}" {unusable}: {first_line(error)}')
    return None


def era_mismatch(
    error: BaseException, *, server: str, remembered: EraVerdict | None, http_status: int | None
) -> EraMismatchError | None:
    """The error for a server that refused the handshake of its remembered era, if ``error``
    says it did.

    Only an answer counts (HTTP error statuses reach the SDK as JSON-RPC errors too), and not
    one about credentials: a server that cannot be reached or wants a login says nothing
    about its era.
    """
    if not isinstance(error, MCPError) or error.code == mcp_types.CONNECTION_CLOSED:
        return None
    if http_status in (401, 403):
        return None
    era = "legacy (initialize)" if remembered == LEGACY_ERA else "2026-07-28"
    return EraMismatchError(
        f'MCP server "{server}" refused the {era} protocol remembered for it ({error.error.message}); '
        "connect again to probe its protocol anew",
        server=server,
    )


def raise_connect_error(
    error: BaseException,
    *,
    server: str,
    timeout_ms: int,
    timed_out: bool,
    era_check: EraCheck | None,
    http: HttpTransport | None,
    process: ServerProcess | None,
) -> NoReturn:
    """Raise whatever stopped the handshake as one clear mcpfleet error.

    An mcpfleet error raised on the way (a secret that could not be resolved, a login
    needed) and a cancellation come out as themselves, out of any exception group.
    """
    root = root_cause(error)
    if root is error and (isinstance(root, MCPFleetError) or not isinstance(root, Exception)):
        raise error
    if isinstance(root, MCPFleetError) or not isinstance(root, Exception):
        raise root from root.__cause__
    raise _connect_error(
        root,
        server=server,
        timeout_ms=timeout_ms,
        timed_out=timed_out,
        era_check=era_check,
        http=http,
        process=process,
    ) from root


def _connect_error(
    root: Exception,
    *,
    server: str,
    timeout_ms: int,
    timed_out: bool,
    era_check: EraCheck | None,
    http: HttpTransport | None,
    process: ServerProcess | None,
) -> ConnectError:
    if timed_out:
        return ConnectTimeoutError(
            f'Connection to MCP server "{server}" timed out after {timeout_ms}ms', server=server
        )
    mismatch = era_check(root) if era_check is not None else None
    if mismatch is not None:
        return mismatch
    if http is not None:
        http_error = _http_connect_error(root, server=server, http=http)
        if http_error is not None:
            return http_error
    if isinstance(root, MCPError) and root.code != mcp_types.CONNECTION_CLOSED:
        return ConnectError(
            f'MCP server "{server}" rejected the handshake: {root.error.message}', server=server
        )
    if process is not None and process.pid is not None:
        tail = " | ".join(process.stderr.tail(STDERR_TAIL_IN_ERRORS)) or "(no stderr output)"
        if process.returncode is not None and not process.signalled:
            return ServerExitedError(
                f'MCP server "{server}" ({process.describe_command()}) '
                f"{exit_description(process.returncode)} before the handshake: {tail}",
                server=server,
                returncode=process.returncode,
            )
        return ConnectError(
            f'MCP server "{server}" ({process.describe_command()}) closed the connection before '
            f"the handshake: {tail}",
            server=server,
        )
    return ConnectError(
        f'MCP server "{server}": handshake failed: {type(root).__name__}: {first_line(root)}', server=server
    )


def _http_connect_error(root: BaseException, *, server: str, http: HttpTransport) -> ConnectError | None:
    from mcp.client.auth.exceptions import OAuthFlowError

    url = redact_url(http.url)
    if isinstance(root, OAuthFlowError):
        # Checked before the HTTP status: the OAuth discovery probes well-known URLs that may
        # answer 404, and that status says nothing about the server's own "url".
        return AuthRequiredError(
            f'MCP server "{server}" ({url}): OAuth failed: {first_line(root)}; run: mcpfleet login {server}',
            server=server,
        )
    status = http.error_status or _status_of(root)
    if status == 401:
        return AuthRequiredError(
            f'MCP server "{server}" ({url}) requires authentication; run: mcpfleet login {server}',
            server=server,
        )
    if status is not None:
        return ConnectError(
            f'MCP server "{server}" answered HTTP {status} at {url}; check the "url" field', server=server
        )
    if _is_connect_failure(root):
        return ConnectError(f'MCP server "{server}": cannot reach {url} ({first_line(root)})', server=server)
    return None


def first_line(error: BaseException) -> str:
    """The first line of an error's text (its type's name when it has none), at most 500 characters."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:500]


def root_cause(error: BaseException) -> BaseException:
    """The first meaningful exception inside (nested) exception groups and cancellations."""
    if isinstance(error, BaseExceptionGroup):
        candidates = [root_cause(inner) for inner in error.exceptions]
        for candidate in candidates:
            if not isinstance(candidate, anyio.get_cancelled_exc_class()):
                return candidate
        return candidates[0]
    return error


def _status_of(error: BaseException) -> int | None:
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) and status >= 400 else None


def _is_connect_failure(error: BaseException) -> bool:
    import httpx2

    return isinstance(error, httpx2.TransportError | OSError)


__all__ = [
    "Asked",
    "EraCheck",
    "closed_error",
    "era_mismatch",
    "first_line",
    "raise_connect_error",
    "request_errors",
    "request_failure",
    "root_cause",
]
