"""The gateway over streamable HTTP: one SDK lowlevel ``Server`` served at ``/mcp`` by uvicorn.

The SDK does the protocol: ``Server.streamable_http_app`` routes ``/mcp`` to its
``StreamableHTTPSessionManager``, which serves both eras (``initialize`` sessions, and
2026-07-28 requests carrying ``_meta``), checks ``Host`` and ``Origin`` with the
``TransportSecuritySettings`` given here, and caps request bodies (413). This module adds
what a gateway needs around it:

- the listening socket (``HttpListener``), bound here rather than by uvicorn and before any
  backend starts, so that a port in use is one error line (uvicorn would ``sys.exit``) and
  ``Host``/``Origin`` are checked against the address actually bound (port 0 included);
- a bearer token, compared in constant time, required on every bind, loopback included: the
  gateway hands out every backend's tools, and every user of this machine can reach
  127.0.0.1. It comes from a file, ``MCPFLEET_GATEWAY_TOKEN`` or the state dir, never from
  the command line, which every user can read (``ps``); ``--insecure-no-auth`` alone, on
  loopback, serves without one;
- read deadlines and connection caps below the descriptor limit (``gateway.connections``);
- a JSON-RPC -32600 for a request whose id MCP forbids, which the SDK would take for a
  notification and never answer;
- the fast path (``gateway.http_fast``): a call that needs no stream is answered as one JSON
  body without the SDK's session machinery. The layers, outermost first: ``BearerGate`` (every
  check: token, Host/Origin, body cap, request ids; the body parsed once), ``FastCalls``, the
  SDK's app. An identity check of its own (team mode's) goes in front of the gate's app, so
  both the fast path and the SDK see its principal in the scope;
- resumable streams (``gateway.resumption``): each SSE stream starts with a priming event
  and a ``retry``, and a client that lost one mid-call reconnects with ``Last-Event-ID``;
- a lifetime inside the caller's task group: cancelling ``serve_http`` stops accepting,
  ends the open sessions, and lets uvicorn finish within a bound. Signals are the caller's:
  uvicorn's own handlers are kept out, so SIGINT/SIGTERM reach the code that owns the fleet;
- a drain (``gateway.draining``, a team gateway's SIGTERM): new work refused with 503, the
  requests in flight waited for within its deadline, the rest answered as cut, then the stop.

In order: ``HttpListener.open(parse_bind(text))``, ``resolve_auth_token(…)`` (before any
backend starts: it takes the token's variable out of the environment they inherit), then
``serve_http(server, listener, auth_token=…)``. Imported only by ``mcpfleet serve --http``
(it imports uvicorn, and the SDK when serving).
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import ipaddress
import json
import os
import re
import secrets
import socket
import sys
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import uvicorn
from anyio.abc import TaskStatus

from mcpfleet import paths
from mcpfleet.contract.environment import GATEWAY_TOKEN_VARIABLE as TOKEN_VARIABLE
from mcpfleet.errors import MCPFleetError, ServeAddressError
from mcpfleet.gateway.connections import ACCEPT_BURST, ConnectionGuard, ListenerBounds, bounded_protocol
from mcpfleet.gateway.draining import CUT_ERROR_CODE, REFUSAL_HEADERS, REFUSAL_TEXT, Drain, cut_message
from mcpfleet.gateway.http_fast import PARSED_BODY

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.types import ASGIApp, Receive, Scope, Send

    from mcpfleet.gateway.resumption import StreamEventStore
    from mcpfleet.gateway.shared_sessions import OwnerOf, SessionRecords

    SharedSessionSettings = tuple[SessionRecords, OwnerOf]


DEFAULT_HOST = "127.0.0.1"
MCP_PATH = "/mcp"
MAX_REQUEST_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body accepted (413 above it): far above any tool call, far below memory."""
SHUTDOWN_GRACE_S = 3
"""How long open HTTP responses get to finish once the gateway stops, before they are cut."""
LISTEN_BACKLOG = ACCEPT_BURST
TOKEN_FILE_NAME = "gateway-token.json"
MAX_TOKEN_FILE_BYTES = 4096
GENERATED_TOKEN_BYTES = 32
"""256 bits of randomness: a token nobody guesses, printable as 43 URL-safe characters."""

_TOKEN_SHAPE = re.compile(r"[\x21-\x7e]+")
"""What a bearer token may hold: visible ASCII, so it travels in a header unchanged."""
_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_WILDCARD_HOSTS = ("0.0.0.0", "::")


@dataclass(frozen=True)
class HttpBind:
    """Where ``mcpfleet serve --http`` listens: the host as the user wrote it, and a port."""

    host: str
    port: int


def parse_bind(text: str) -> HttpBind:
    """``[HOST:]PORT`` (``8080``, ``0.0.0.0:8080``, ``[::1]:0``, ``localhost:9000``) as an ``HttpBind``.

    The host defaults to 127.0.0.1: a gateway is reachable from the network only when asked.
    """
    host, separator, port_text = text.rpartition(":")
    if not separator:
        host, port_text = DEFAULT_HOST, text
    elif host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ServeAddressError(f"--http {text!r}: write an IPv6 address in brackets, as in [::1]:8080")
    if not host:
        raise ServeAddressError(f"--http {text!r}: the host before ':' is empty; write HOST:PORT or PORT")
    try:
        port = int(port_text)
    except ValueError:
        raise ServeAddressError(
            f"--http {text!r}: the port must be a number from 0 to 65535 (0 picks a free one)"
        ) from None
    if not 0 <= port <= 65535:
        raise ServeAddressError(f"--http {text!r}: the port must be from 0 to 65535 (0 picks a free one)")
    return HttpBind(host, port)


@dataclass
class HttpListener:
    """A TCP socket listening where ``--http`` asked, opened before anything else starts.

    Opening it first makes a port in use one error line before any backend is spawned, and
    tells what was actually bound (the port behind port 0, the address behind a name), which
    the token rule and the Host/Origin checks are about.
    """

    bind: HttpBind
    socket: socket.socket

    @classmethod
    def open(cls, bind: HttpBind) -> HttpListener:
        """Listen on ``bind``; a port in use or a host that is not here is one clear error."""
        try:
            addresses = socket.getaddrinfo(
                bind.host, bind.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except socket.gaierror as error:
            raise ServeAddressError(
                f"--http {_display(bind)}: cannot resolve {bind.host!r} ({error.strerror}); "
                "give an address of this machine, such as 127.0.0.1 or 0.0.0.0"
            ) from error
        # IPv4 first: "localhost" often resolves to ::1 first, and clients mostly try 127.0.0.1.
        family, kind, protocol, _, address = sorted(addresses, key=lambda entry: entry[0] != socket.AF_INET)[
            0
        ]
        listening = socket.socket(family, kind, protocol)
        try:
            # A restarted gateway may take its port back while old connections sit in
            # TIME_WAIT; on Linux this never lets two servers listen on one port.
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listening.bind(address)
            listening.listen(LISTEN_BACKLOG)
        except OSError as error:
            listening.close()
            if error.errno in (errno.EADDRINUSE, errno.EACCES):
                reason = "is already in use" if error.errno == errno.EADDRINUSE else "needs privileges"
                raise ServeAddressError(
                    f"--http {_display(bind)}: port {bind.port} {reason}; "
                    "pick another one (or 0 for a free port)"
                ) from error
            raise ServeAddressError(
                f"--http {_display(bind)}: cannot listen there ({error.strerror or error}); "
                "give an address of this machine, such as 127.0.0.1 or 0.0.0.0"
            ) from error
        return cls(bind, listening)

    @property
    def address(self) -> str:
        """The IP address bound (``0.0.0.0`` or ``::`` for every interface)."""
        return str(self.socket.getsockname()[0])

    @property
    def port(self) -> int:
        return int(self.socket.getsockname()[1])

    @property
    def loopback(self) -> bool:
        """Whether only this machine can reach it (only then may ``--insecure-no-auth`` serve it)."""
        return is_loopback_address(self.address)

    @property
    def url(self) -> str:
        return f"http://{_host_for_url(self.address)}:{self.port}{MCP_PATH}"

    def close(self) -> None:
        self.socket.close()


def is_loopback_address(address: str) -> bool:
    """Whether a bound IP address is reachable from this machine only."""
    return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback


def gateway_token_file() -> Path:
    """Where a generated bearer token is kept, so the next start (and its clients) reuse it."""
    return paths.user_state_dir() / TOKEN_FILE_NAME


def check_token_shape(token: str, where: str) -> str:
    """``token`` if it can travel in an ``Authorization`` header unchanged; else a usage error
    naming ``where`` it came from."""
    if not _TOKEN_SHAPE.fullmatch(token):
        raise ServeAddressError(
            f"{where}: the bearer token must be visible ASCII characters only, with no spaces "
            f"(or leave it out: the gateway then generates one into {gateway_token_file()})"
        )
    return token


def read_token_file(path: Path) -> str:
    """The bearer token held in ``path``: its text, or the ``bearer_token`` of a JSON object
    (so ``gateway-token.json`` itself may be given); one clear error when it cannot be read."""
    where = f"--auth-token-file {path}"
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_TOKEN_FILE_BYTES + 1)
    except OSError as error:
        raise ServeAddressError(
            f"{where}: cannot read it ({error.strerror or error}); give a readable file that holds the token"
        ) from error
    if len(data) > MAX_TOKEN_FILE_BYTES:
        raise ServeAddressError(
            f"{where}: larger than {MAX_TOKEN_FILE_BYTES} bytes; the file must hold the token alone"
        )
    try:
        text = data.decode("utf-8-sig").strip()
    except UnicodeDecodeError:
        raise ServeAddressError(f"{where}: not UTF-8 text; the file must hold the token alone") from None
    if text.startswith("{"):
        with contextlib.suppress(ValueError):
            document = json.loads(text)
            if isinstance(document, dict) and isinstance(document.get("bearer_token"), str):
                text = document["bearer_token"]
    return check_token_shape(text, where)


def stored_or_generated_token(notice: Callable[[str], None]) -> str:
    """The gateway's stored bearer token, generated on first need and reused by later starts.

    It lives 0600 in mcpfleet's state dir (0700), written under the same lock and atomic rename
    as mcpfleet's other files, so two gateways starting together agree on one token. ``notice``
    says where it is, never what it is: stderr may end up in a host's log.
    """
    from mcpfleet.config.writer import update_json_file

    path = gateway_token_file()

    def ensure_token(document: dict[str, Any]) -> tuple[str, bool]:
        kept = document.get("bearer_token")
        if isinstance(kept, str) and _TOKEN_SHAPE.fullmatch(kept):
            return kept, False
        document["bearer_token"] = secrets.token_urlsafe(GENERATED_TOKEN_BYTES)
        return document["bearer_token"], True

    token, generated = update_json_file(path, ensure_token)
    # The file may predate mcpfleet's modes (copied, restored from a backup): a token others
    # can read is no secret.
    os.chmod(path, 0o600)
    where = f'the "bearer_token" of {path}'
    if generated:
        notice(f"generated a bearer token for the gateway: clients must send it, {where}")
    else:
        notice(f"clients must send the gateway's bearer token, {where}")
    return token


def resolve_auth_token(
    *,
    token_file: Path | None,
    insecure_no_auth: bool,
    loopback: bool,
    environment: MutableMapping[str, str],
    notice: Callable[[str], None],
) -> str | None:
    """The token every request must carry (``None`` only with ``insecure_no_auth``).

    In order: the file given, ``MCPFLEET_GATEWAY_TOKEN``, else the stored (or generated) one.
    The variable is taken out of ``environment`` whatever the outcome: every backend inherits
    the gateway's environment, and none of them may hold the key to the whole fleet.
    """
    from_environment = environment.pop(TOKEN_VARIABLE, None)
    if insecure_no_auth:
        if token_file is not None:
            raise ServeAddressError(
                "--insecure-no-auth and --auth-token-file contradict each other: drop one of them"
            )
        if not loopback:
            raise ServeAddressError(
                "--insecure-no-auth serves loopback binds only (127.0.0.1, [::1]): anyone on the "
                "network could call every tool; drop it, and give clients the bearer token"
            )
        notice(
            "--insecure-no-auth: serving WITHOUT a bearer token; every user of this machine can "
            "call every tool of this fleet. Use it for throw-away fleets only"
        )
        return None
    if token_file is not None:
        token = read_token_file(token_file)
        notice(f"clients must send the gateway's bearer token, the one in {token_file}")
        return token
    if from_environment is not None:
        token = check_token_shape(from_environment.strip(), TOKEN_VARIABLE)
        notice(f"clients must send the gateway's bearer token, the one in {TOKEN_VARIABLE}")
        return token
    return stored_or_generated_token(notice)


def transport_security_for(
    bind: HttpBind, bound_address: str, port: int, public_url: str | None = None
) -> TransportSecuritySettings:
    """``Host`` and ``Origin`` values a client of this bind can honestly send (DNS rebinding).

    A web page can make a browser send requests to a local port under a domain its owner
    controls, re-pointed at 127.0.0.1: the ``Host`` (and the ``Origin``) then name that domain.
    Only names that lead here are accepted: the loopback names for a loopback or wildcard
    bind, the address and name the user bound, and this machine's own names and addresses;
    and a team gateway's ``public_url`` (the name a load balancer in front of it answers to).
    """
    from mcp.server.transport_security import TransportSecuritySettings

    names: list[str] = []
    wildcard = bound_address in _WILDCARD_HOSTS
    if wildcard or is_loopback_address(bound_address):
        names.extend(_LOOPBACK_NAMES)
    given = [bind.host, bound_address]
    if wildcard or not is_loopback_address(bound_address):
        given.extend(_machine_names())
    # "0.0.0.0" and "::" are where to listen, never where a client sends its request.
    names.extend(_host_for_url(name) for name in given if name not in _WILDCARD_HOSTS)
    names = list(dict.fromkeys(names))
    hosts = [f"{name}:{port}" for name in names]
    if port == 80:  # a browser leaves the default port out of both headers
        hosts.extend(names)
    origins = [f"http://{host}" for host in hosts]
    if public_url is not None:
        from urllib.parse import urlsplit

        public = urlsplit(public_url)
        hosts.append(public.netloc)
        origins.append(f"{public.scheme}://{public.netloc}")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def _machine_names() -> Iterator[str]:
    """This machine's host name, full name and the addresses they resolve to."""
    names = {socket.gethostname(), socket.getfqdn()}
    yield from names
    for name in names:
        with contextlib.suppress(OSError):
            for entry in socket.getaddrinfo(name, None, type=socket.SOCK_STREAM):
                yield str(entry[4][0])


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _display(bind: HttpBind) -> str:
    return f"{_host_for_url(bind.host)}:{bind.port}"


Admission = Callable[["Scope", "Send"], Awaitable["Scope | None"]]
"""Whether a request is served, decided from its headers alone, in place of the gate's one
token (a team gateway's identity check): the scope to serve it with (with what it learnt added,
such as who is asking), or ``None`` once it has answered the request itself (a 401, a page of
its own). It runs before the body is read: a client nobody admits cannot make the gateway read
and hold a body of 4 MB on each of its connections."""


class BearerGate:
    """Answer 401 to every HTTP request without ``Authorization: Bearer <token>`` (or that
    ``admission`` refuses), 503 once stopping, 421/403 to a foreign ``Host``/``Origin`` on the
    MCP endpoint (``security``, the SDK's own check), and a JSON-RPC -32600 to a request whose
    id is neither a string nor an integer.

    The comparison is constant-time (``hmac.compare_digest``), so response timing does not
    reveal how much of a guess was right. More than one ``Authorization`` header is refused:
    two proxies could each read a different one.

    The SDK takes a message whose ``id`` is an object, a float or null for a notification
    (its request type refuses the id, its notification type ignores it) and answers 202 with
    nothing after it, so the client waits for an answer that never comes. A POST's body is
    read here first (at most ``max_body_bytes``: 413 above it, as the SDK would), checked,
    and handed on unchanged, with its decoded JSON in the scope (``http_fast.PARSED_BODY``) so
    that nothing after the gate parses it again.

    Every check runs here, in front of whatever the gate guards (the fast path, then the SDK,
    which checks Host and Origin again): nothing behind it sees a request that fails one.
    """

    def __init__(
        self,
        app: ASGIApp,
        token: str | None,
        *,
        security: TransportSecuritySettings | None = None,
        max_body_bytes: int = MAX_REQUEST_BODY_BYTES,
        admission: Admission | None = None,
        drain: Drain | None = None,
    ) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware

        self.app = app
        self.expected = token.encode("ascii") if token is not None else None
        self.security = TransportSecurityMiddleware(security) if security is not None else None
        self.max_body_bytes = max_body_bytes
        self.admission = admission
        self.drain = drain
        self.stopping = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.stopping:
            await _plain_response(send, 503, b"the gateway is shutting down", [])
            return
        if self.expected is not None:
            presented = [value for key, value in scope["headers"] if key == b"authorization"]
            if not (len(presented) == 1 and self._matches(presented[0])):
                challenge = b'Bearer realm="mcpfleet"' + (b', error="invalid_token"' if presented else b"")
                await _plain_response(
                    send,
                    401,
                    b"this gateway needs Authorization: Bearer <token>; mcpfleet serve said on its "
                    b"stderr where its token is",
                    [(b"www-authenticate", challenge)],
                )
                return
        if self.admission is not None:
            admitted = await self.admission(scope, send)
            if admitted is None:
                return  # answered already
            scope = admitted
        if self.security is not None and scope["path"].startswith(MCP_PATH):
            # The MCP endpoint's check, which its fast path would otherwise pass by; a team
            # gateway's own pages (its connect forms) are not JSON-RPC and check themselves.
            from starlette.requests import Request

            refusal = await self.security.validate_request(Request(scope), is_post=scope["method"] == "POST")
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        message: Any = None
        if scope["method"] == "POST":
            try:
                body = await _read_body(receive, self.max_body_bytes)
            except _ClientGone:
                return  # gone before its body was in (a read deadline, a disconnect): nobody to answer
            if body is None:
                await _plain_response(send, 413, b"Request body too large", [])
                return
            message = _decoded(body)
            if _has_invalid_request_id(message):
                await _json_response(send, 400, _INVALID_REQUEST_ID_ANSWER)
                return
            scope = {**scope, PARSED_BODY: message}
            receive = _replay(body, receive)
        drain = self.drain
        if drain is not None and scope["path"].startswith(MCP_PATH):
            if drain.refuses(scope, message):
                await _plain_response(send, 503, REFUSAL_TEXT, REFUSAL_HEADERS)
                return
            if drain.holds(scope, message):
                await _serve_held(self.app, drain, scope, receive, send, message)
                return
        await self.app(scope, receive, send)

    def _matches(self, header: bytes) -> bool:
        assert self.expected is not None
        scheme, _, credential = header.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), self.expected)


_INVALID_REQUEST_ID_ANSWER = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32600, "message": "Invalid Request: a request's id must be a string or an integer"},
}


class _ClientGone(MCPFleetError):
    """The connection ended before the request's body was complete."""


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request's whole body, or ``None`` past ``limit`` bytes; ``_ClientGone`` if it never came."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands the body already read, then whatever the connection says next."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Any:
        if pending:
            return pending.pop()
        return await receive()

    return replayed


_NOT_JSON = object()
"""What ``_decoded`` gives for a body that is not JSON (the SDK answers its parse error)."""


def _decoded(body: bytes) -> Any:
    import pydantic_core

    try:
        return pydantic_core.from_json(body)
    except ValueError:
        return _NOT_JSON


def _has_invalid_request_id(message: Any) -> bool:
    """Whether ``message`` is one JSON-RPC request (a ``method`` and an ``id``) whose id MCP forbids:
    anything but a string or an integer (an object, an array, a float, a boolean, null)."""
    if not (isinstance(message, dict) and "method" in message and "id" in message):
        return False
    request_id = message["id"]
    return not (
        isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool))
    )


async def _plain_response(send: Send, status: int, text: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": text})


async def _json_response(send: Send, status: int, document: dict[str, Any]) -> None:
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
    )
    await send({"type": "http.response.body", "body": json.dumps(document).encode()})


class _GatewayUvicorn(uvicorn.Server):
    """uvicorn that says when it listens, and leaves signal handling to its caller.

    Its own signal handlers would replace the caller's and re-raise the signal once uvicorn
    is done, killing the process before the fleet's backends are closed.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = anyio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def stderr_notice(text: str) -> None:
    """One ``mcpfleet: …`` line on stderr: stdout is not ours when a host runs the gateway."""
    sys.stderr.write(f"mcpfleet: {text}\n")
    sys.stderr.flush()


async def serve_http(
    server: Server[Any],
    listener: HttpListener,
    *,
    auth_token: str | None,
    max_request_body_bytes: int = MAX_REQUEST_BODY_BYTES,
    bounds: ListenerBounds | None = None,
    notice: Callable[[str], None] = stderr_notice,
    around: Callable[[ASGIApp], ASGIApp] | None = None,
    admission: Admission | None = None,
    public_url: str | None = None,
    drain: Drain | None = None,
    event_store: StreamEventStore | None = None,
    sessions: SharedSessionSettings | None = None,
    task_status: TaskStatus[str] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``server`` over streamable HTTP on ``listener`` until cancelled, then close it.

    ``auth_token`` is what every request must carry (``None``: nothing, ``--insecure-no-auth``;
    see ``resolve_auth_token``). ``bounds`` are the read deadlines and connection caps
    (``gateway.connections``; by default, from this process's descriptor limit as it is now).
    Once listening, ``notice`` gets ``serving on http://HOST:PORT/mcp`` and ``task_status`` the URL.
    ``around`` wraps the SDK's application in the layers a team gateway puts in front of it (its
    identity check, which sets each request's principal, and its own pages), inside the size and
    request-id checks and the 503 of a gateway stopping; ``admission`` decides from each request's
    headers, before its body is read, whether it is served (a team gateway's identity check, with
    ``auth_token=None``; see ``Admission``); ``public_url`` is the URL clients of a
    team gateway address (its ``Host`` is accepted besides this machine's names). With a ``drain``
    (``gateway.draining``), serving ends once it has started and drained: new work refused,
    requests in flight answered or, at its deadline, cut; then the gateway stops as when cancelled.
    ``event_store`` keeps the resumable streams' events (default: this process's own,
    ``BoundedEventStore``); ``sessions`` (the records and who owns a request) lets this process
    serve handshake-era sessions other replicas opened (``gateway.shared_sessions``).
    """
    from mcpfleet.gateway.resumption import BoundedEventStore

    with contextlib.closing(listener):
        guard = ConnectionGuard(bounds if bounds is not None else ListenerBounds.for_this_process())
        security = transport_security_for(listener.bind, listener.address, listener.port, public_url)
        # A stream that breaks mid-call can be resumed (SEP-1699), from the recent past only.
        events = event_store if event_store is not None else BoundedEventStore()
        if drain is not None:  # a request's stream resumed is waited for, a session's own never
            drain.resumes_a_request = events.resumes_a_request
        app = _mcp_app(server, listener, security, max_request_body_bytes, events, sessions)
        gate = BearerGate(
            around(app) if around is not None else app,
            auth_token,
            security=security,
            max_body_bytes=max_request_body_bytes,
            admission=admission,
            drain=drain,
        )
        http_server = _GatewayUvicorn(
            uvicorn.Config(
                gate,
                http=bounded_protocol(guard),
                backlog=ACCEPT_BURST,
                lifespan="off",  # the session manager runs in our task group, below
                log_config=None,  # keep mcpfleet's logging (and its redaction) in charge
                access_log=False,
                proxy_headers=False,
                server_header=False,
                ws="none",
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
            )
        )

        def stop_serving() -> None:
            gate.stopping = True
            http_server.should_exit = True

        async with anyio.create_task_group() as task_group:
            task_group.start_soon(_serve_until_told, http_server, listener.socket)
            try:
                async with server.session_manager.run():
                    try:
                        await http_server.listening.wait()
                        notice(f"serving on {listener.url}")
                        task_status.started(listener.url)
                        if drain is None:
                            await anyio.sleep_forever()
                        else:
                            await _drained(drain, notice)
                    finally:
                        # New requests get 503 from here on; ending every session (and so
                        # every open event stream) lets uvicorn finish well within its grace.
                        stop_serving()
                        await _end_sessions(server)
            finally:
                stop_serving()  # the session manager could not even start


def _mcp_app(
    server: Server[Any],
    listener: HttpListener,
    security: TransportSecuritySettings,
    max_request_body_bytes: int,
    events: StreamEventStore,
    sessions: SharedSessionSettings | None,
) -> ASGIApp:
    """The SDK's MCP application, with the fast path of ``tools/call`` in front of it
    (``gateway.http_fast``) and, given ``sessions``, the sessions other replicas opened."""
    from mcpfleet.gateway.handlers import fast_path_of
    from mcpfleet.gateway.http_fast import FastCalls
    from mcpfleet.gateway.resumption import RETRY_INTERVAL_MS

    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=security,
        max_request_body_size=max_request_body_bytes,
        host=listener.bind.host,
        event_store=events,
        retry_interval=RETRY_INTERVAL_MS,
    )
    fast_path = fast_path_of(server)
    if fast_path is not None:
        app = FastCalls(app, server, fast_path)
    if sessions is not None:
        from mcpfleet.gateway.shared_sessions import SharedSessions

        app = SharedSessions(app, server, *sessions)
    return app


async def _serve_held(
    app: ASGIApp, drain: Drain, scope: Scope, receive: Receive, send: Send, message: Any
) -> None:
    """Serve one request a drain waits for. Cut at its deadline, it is answered with a JSON-RPC
    error saying so: as the response itself when none had begun, as the last event of its
    stream when that had (a stream of another kind is just ended)."""
    begun = ended = streamed = False

    async def watched(event: MutableMapping[str, Any]) -> None:
        nonlocal begun, ended, streamed
        if event["type"] == "http.response.start":
            begun = True
            streamed = any(
                name == b"content-type" and value.startswith(b"text/event-stream")
                for name, value in event.get("headers", [])
            )
        ended = event["type"] == "http.response.body" and not event.get("more_body", False)
        await send(event)

    with drain.tracking() as cut:
        with cut:
            await app(scope, receive, watched)
        if not cut.cancelled_caught or ended:
            return
        request_id = message.get("id") if isinstance(message, dict) else None
        error = {"code": CUT_ERROR_CODE, "message": cut_message(drain.timeout_s)}
        answer = {"jsonrpc": "2.0", "id": request_id, "error": error}
        if not begun:
            await _json_response(send, 200, answer)
            return
        last = b""
        if streamed and request_id is not None:
            last = f"event: message\ndata: {json.dumps(answer)}\n\n".encode()
        await send({"type": "http.response.body", "body": last, "more_body": False})


async def _drained(drain: Drain, notice: Callable[[str], None]) -> None:
    """Once the drain starts, wait for the requests in flight (within its deadline), saying how it went."""
    await drain.started()
    notice(
        f"draining: {drain.in_flight} request(s) in flight get up to {drain.timeout_s:g} s "
        "(drain_timeout); new sessions and requests are refused with 503"
    )
    left = await drain.drained()
    if left:
        notice(f"drain_timeout ({drain.timeout_s:g} s) reached: cutting {left} request(s) still in flight")
        await drain.cut(within_s=SHUTDOWN_GRACE_S)
    else:
        notice("drained: every request in flight was answered")


async def _end_sessions(server: Server[Any]) -> None:
    """Close every handshake-era session's streams before the session manager cancels them.

    Cancelled with its streams still open, a session's requests in flight each try to write
    their "connection closed" answer into a stream nobody reads any more, wait a second, and
    warn "transport write blocked" (one line per request: a host with a dozen calls in flight
    printed a dozen on SIGTERM). With the streams closed first, those writes fail at once, as
    they should: the client is going away with the gateway.
    """
    from mcpfleet.client._sdk import open_http_sessions

    with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_GRACE_S):
        for transport in open_http_sessions(server.session_manager):
            await transport.terminate()


async def _serve_until_told(http_server: uvicorn.Server, listening: socket.socket) -> None:
    """uvicorn's run, shielded: it stops when told (``should_exit``), never half-way by a cancel."""
    with anyio.CancelScope(shield=True):
        await http_server.serve(sockets=[listening])
