"""OAuth for HTTP MCP servers: a token store on disk and the SDK's OAuth client, set up for
mcpfleet's two situations.

- A connect (manager, agent session) must never wait for a person: it uses stored tokens,
  refreshes them when they expire, and otherwise fails with ``AuthRequiredError`` telling
  the user to run ``mcpfleet login NAME``.
- ``mcpfleet login NAME`` runs the whole flow (metadata discovery, dynamic client
  registration or a client ID metadata document, PKCE, a loopback callback on 127.0.0.1,
  token exchange) and then connects once to prove the tokens work.

Two grants need no person at all and run wherever a connect happens:
``grant_type: client_credentials`` (a client secret, or a ``private_key_jwt`` assertion signed
with a configured key) and ``grant_type: identity_assertion`` (enterprise-managed
authorization, SEP-990: the user's ID token from the company identity provider is exchanged
there for an identity assertion grant, which the MCP authorization server turns into a token).

The discovery, registration, PKCE and refresh requests are the SDK's
(``OAuthClientProvider``); this module adds persistence, the loopback callback and the
non-interactive policy. It imports the SDK at module level, so only the client code that
actually contacts a server (and the login/logout commands) imports it.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import socket
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import anyio
import httpx2
from anyio.abc import SocketListener, SocketStream
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.auth.utils import is_valid_client_metadata_url
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import AnyUrl, ValidationError

from mcpfleet import paths
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import AuthRequiredError, ConfigError, ConnectError, LoginError

logger = logging.getLogger(__name__)


class _OwnErrorsFilter(logging.Filter):
    """Drop the SDK's traceback log of an mcpfleet auth error: the caller reports that error
    in one clear line, so the log would only repeat it as a stack trace."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, AuthRequiredError | LoginError)


logging.getLogger("mcp.client.auth.oauth2").addFilter(_OwnErrorsFilter())

AuthorizeUrlHandler = Callable[[str], Awaitable[None] | None]

CLIENT_NAME = "mcpfleet"
DEFAULT_CALLBACK_PATH = "/callback"
DEFAULT_LOGIN_TIMEOUT_S = 300.0
REFRESH_SKEW_S = 60
"""Tokens loaded from disk are refreshed this long before they expire, so a request never
leaves with a token that dies in flight."""
CALLBACK_REQUEST_TIMEOUT_S = 10.0
"""How long one connection to the loopback callback may take to send its request line."""
MAX_CALLBACK_REQUEST_BYTES = 64 * 1024
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
SECRET_AUTH_METHODS = ("client_secret_basic", "client_secret_post")
"""How a client with a secret authenticates at the token endpoint, in order of preference."""
DEFAULT_JWT_SIGNING_ALGORITHM = "RS256"
TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
IDP_REQUEST_TIMEOUT_S = 30.0


def normalise_server_url(url: str) -> str:
    """The form of a server URL that keys its token file: case-insensitive parts lowered,
    default ports and fragments dropped, no trailing slash."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    default_port = {"http": 80, "https": 443}.get(scheme)
    netloc = host if port is None or port == default_port else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def tokens_directory() -> Path:
    """Folder of the OAuth token files, under the user state dir."""
    return paths.user_state_dir() / "oauth"


class FileTokenStorage:
    """The SDK's ``TokenStorage`` on disk: one JSON file per server URL.

    The file is named by the SHA-256 of the normalised URL, written atomically (temporary
    file, then ``os.replace``) with mode 0600 in a 0700 folder. Besides the tokens and the
    client registration it keeps when the access token expires (the SDK only knows a
    relative ``expires_in``) and the discovered server metadata, so a later process can
    refresh at the right endpoint without a fresh discovery.
    """

    def __init__(self, server_url: str, *, directory: Path | None = None) -> None:
        self.server_url = server_url
        self.directory = directory if directory is not None else tokens_directory()
        digest = hashlib.sha256(normalise_server_url(server_url).encode()).hexdigest()
        self.path = self.directory / f"{digest}.json"

    async def get_tokens(self) -> OAuthToken | None:
        record = await anyio.to_thread.run_sync(self._read)
        raw_tokens = record.get("tokens")
        if not isinstance(raw_tokens, dict):
            return None
        try:
            tokens = OAuthToken.model_validate(raw_tokens)
        except ValidationError:
            logger.warning("Ignoring unreadable OAuth tokens in %s", self.path)
            return None
        expires_at = record.get("expires_at")
        if isinstance(expires_at, int | float):
            # Hand the SDK the time that is left, not the lifetime it was issued with.
            tokens.expires_in = max(0, int(expires_at - time.time()))
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        await anyio.to_thread.run_sync(
            self._update,
            {"tokens": tokens.model_dump(mode="json", exclude_none=True), "expires_at": expires_at},
        )

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        record = await anyio.to_thread.run_sync(self._read)
        raw_client = record.get("client_info")
        if not isinstance(raw_client, dict):
            return None
        try:
            return OAuthClientInformationFull.model_validate(raw_client)
        except ValidationError:
            logger.warning("Ignoring an unreadable OAuth client registration in %s", self.path)
            return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await anyio.to_thread.run_sync(
            self._update, {"client_info": client_info.model_dump(mode="json", exclude_none=True)}
        )

    async def get_server_metadata(self) -> tuple[ProtectedResourceMetadata | None, OAuthMetadata | None]:
        """The protected-resource and authorization-server metadata found at the last login."""
        record = await anyio.to_thread.run_sync(self._read)
        resource_metadata: ProtectedResourceMetadata | None = None
        server_metadata: OAuthMetadata | None = None
        with suppress(ValidationError):
            if isinstance(record.get("protected_resource_metadata"), dict):
                resource_metadata = ProtectedResourceMetadata.model_validate(
                    record["protected_resource_metadata"]
                )
            if isinstance(record.get("authorization_server_metadata"), dict):
                server_metadata = OAuthMetadata.model_validate(record["authorization_server_metadata"])
        return resource_metadata, server_metadata

    async def set_server_metadata(
        self, resource_metadata: ProtectedResourceMetadata | None, server_metadata: OAuthMetadata | None
    ) -> None:
        changes: dict[str, Any] = {}
        if resource_metadata is not None:
            changes["protected_resource_metadata"] = resource_metadata.model_dump(
                mode="json", exclude_none=True
            )
        if server_metadata is not None:
            changes["authorization_server_metadata"] = server_metadata.model_dump(
                mode="json", exclude_none=True
            )
        if changes:
            await anyio.to_thread.run_sync(self._update, changes)

    async def forget_tokens(self) -> None:
        """Drop the tokens but keep the client registration (a new login reuses it)."""
        await anyio.to_thread.run_sync(self._update, {"tokens": None, "expires_at": None})

    def has_tokens(self) -> bool:
        return isinstance(self._read().get("tokens"), dict)

    def clear(self) -> bool:
        """Forget everything stored for this server; ``True`` if there was something."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            logger.warning("Ignoring a corrupt OAuth token file %s; a new login will replace it", self.path)
            return {}
        return record if isinstance(record, dict) else {}

    def _update(self, changes: Mapping[str, Any]) -> None:
        record = self._read()
        record.update(changes)
        record["server_url"] = self.server_url
        self._write(record)

    def _write(self, record: Mapping[str, Any]) -> None:
        paths.make_private_folder(self.directory)
        # A token folder left more open by an earlier version is closed again.
        os.chmod(self.directory, 0o700)
        descriptor, temporary = tempfile.mkstemp(prefix=".tokens-", suffix=".tmp", dir=self.directory)
        try:
            # mkstemp creates the file 0600, so the tokens are never readable by others.
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(record, handle, indent=2, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            with suppress(FileNotFoundError):
                os.unlink(temporary)
            raise


class LoopbackCallback:
    """The redirect target of the authorization flow: a one-shot HTTP listener on 127.0.0.1.

    The port is fixed when the redirect URI is first built; the socket listens before the
    authorization URL is handed out (``login`` binds it even before the flow starts), so a
    browser that comes back quickly waits in the listen queue instead of being refused.
    """

    def __init__(
        self, server_name: str, *, port: int = 0, path: str = DEFAULT_CALLBACK_PATH, host: str = "127.0.0.1"
    ) -> None:
        self.server_name = server_name
        self.path = path
        self.host = host
        """How the redirect URI names the loopback host (a configured ``localhost`` stays so)."""
        self._requested_port = port
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        """The callback port, fixed on first use: the redirect URI registered with the server
        must stay the same for every later bind."""
        if self._requested_port == 0 and self._socket is None:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind(("127.0.0.1", 0))
                self._requested_port = probe.getsockname()[1]
        if self._socket is not None:
            bound: int = self._socket.getsockname()[1]
            return bound
        return self._requested_port

    @property
    def redirect_uri(self) -> str:
        return f"http://{self.host}:{self.port}{self.path}"

    def bind(self) -> None:
        """Listen on the callback port (once), so a quick browser queues instead of being refused."""
        if self._socket is not None:
            return
        listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # A fixed callback port must be reusable right after the previous login, whose
        # closed connections linger in TIME_WAIT.
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listening.bind(("127.0.0.1", self._requested_port))
        except OSError as error:
            listening.close()
            raise LoginError(
                f"Cannot listen on 127.0.0.1:{self._requested_port} for the login callback of MCP server "
                f'"{self.server_name}": {error.strerror}; free the port or change oauth.callback_port',
                server=self.server_name,
            ) from error
        listening.listen(8)
        self._socket = listening
        self._requested_port = listening.getsockname()[1]

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    async def wait_for_code(self, timeout_s: float) -> AuthorizationCodeResult:
        """Serve the callback until it brings a code (or an error), within ``timeout_s``."""
        self.bind()
        assert self._socket is not None
        listener = await SocketListener.from_socket(self._socket.dup())
        try:
            with anyio.fail_after(timeout_s):
                while True:
                    stream = await listener.accept()
                    async with stream:
                        result = await self._handle(stream)
                    if result is not None:
                        return result
        except TimeoutError:
            raise LoginError(
                f'Login to MCP server "{self.server_name}" timed out after {timeout_s:g}s waiting for the '
                "browser to come back; run the login again",
                server=self.server_name,
            ) from None
        finally:
            await listener.aclose()

    async def _handle(self, stream: SocketStream) -> AuthorizationCodeResult | None:
        """Answer one request; the code it carries, or ``None`` for a stray request."""
        request = b""
        with anyio.move_on_after(CALLBACK_REQUEST_TIMEOUT_S):
            while b"\r\n" not in request and len(request) < MAX_CALLBACK_REQUEST_BYTES:
                try:
                    request += await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
        request_line = request.split(b"\r\n", 1)[0].decode("latin-1")
        method, _, rest = request_line.partition(" ")
        target = rest.rpartition(" ")[0] or rest
        parts = urlsplit(target)
        if method != "GET" or parts.path != self.path:
            await _respond(stream, 404, "Not found.")
            return None
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        if "error" in query:
            await _respond(stream, 400, "Login failed. You can close this tab.")
            detail = query.get("error_description", "")
            raise LoginError(
                f'The authorization server refused the login to MCP server "{self.server_name}": '
                f"{query['error']}{': ' + detail if detail else ''}",
                server=self.server_name,
            )
        if "code" not in query:
            await _respond(stream, 400, "This address expects an authorization code.")
            return None
        await _respond(stream, 200, f"Logged in to {self.server_name}. You can close this tab.")
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


async def _respond(stream: SocketStream, status: int, text: str) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    body = f"<!doctype html><title>mcpfleet</title><p>{text}</p>\n".encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(head + body)


async def _announce(handler: AuthorizeUrlHandler, url: str) -> None:
    outcome = handler(url)
    if inspect.isawaitable(outcome):
        await outcome


def _print_authorize_url(server_name: str) -> AuthorizeUrlHandler:
    def announce(url: str) -> None:
        sys.stderr.write(f"Open this URL to log in to {server_name}: {url}\n")
        sys.stderr.flush()

    return announce


class FleetOAuthProvider(OAuthClientProvider):
    """The SDK's OAuth client with mcpfleet's persistence and its non-interactive policy.

    Interactive: the SDK flow as is; the authorization URL is handed to ``on_authorize_url``
    while the loopback callback waits, and an unfinished handler is cancelled once the
    callback has arrived (a browser never returns, a test follows the redirect itself).

    Non-interactive: stored tokens, refreshed when they expire or when the server rejects
    them; when only a person could help, ``AuthRequiredError``, never a wait.
    """

    def __init__(
        self,
        server_name: str,
        server_url: str,
        *,
        storage: FileTokenStorage,
        client_metadata: OAuthClientMetadata,
        interactive: bool,
        callback: LoopbackCallback | None,
        on_authorize_url: AuthorizeUrlHandler,
        callback_timeout_s: float,
        configured_client: OAuthClientInformationFull | None,
        configured_scope: str | None,
        configured_auth_method: str | None = None,
        client_metadata_url: str | None = None,
    ) -> None:
        super().__init__(
            server_url,
            client_metadata,
            storage,
            redirect_handler=self._remember_authorize_url,
            callback_handler=self._wait_for_callback,
            client_metadata_url=client_metadata_url,
        )
        self.server_name = server_name
        self.interactive = interactive
        self._storage = storage
        self._callback = callback
        self._on_authorize_url = on_authorize_url
        self._callback_timeout_s = callback_timeout_s
        self._configured_client = configured_client
        self._configured_scope = configured_scope
        self._configured_auth_method = configured_auth_method
        self._authorize_url: str | None = None

    def login_needed_error(self) -> AuthRequiredError:
        return AuthRequiredError(
            f'MCP server "{self.server_name}" needs a login: run: mcpfleet login {self.server_name}',
            server=self.server_name,
        )

    async def _initialize(self) -> None:
        await super()._initialize()
        tokens = self.context.current_tokens
        if tokens is not None and tokens.expires_in is not None:
            self.context.token_expiry_time = time.time() + tokens.expires_in - REFRESH_SKEW_S
        resource_metadata, server_metadata = await self._storage.get_server_metadata()
        if resource_metadata is not None:
            self.context.protected_resource_metadata = resource_metadata
            if resource_metadata.authorization_servers:
                self.context.auth_server_url = str(resource_metadata.authorization_servers[0])
        if server_metadata is not None:
            self.context.oauth_metadata = server_metadata
        if self._configured_client is not None:
            self.context.client_info = self._configured_client
            self._choose_token_auth_method()
        elif self.interactive and self.context.client_info is not None:
            # Authorization servers compare redirect URIs exactly: a registration made for
            # another callback port cannot be used, so register again.
            registered = [str(uri) for uri in self.context.client_info.redirect_uris or []]
            wanted = [str(uri) for uri in self.context.client_metadata.redirect_uris or []]
            if not set(wanted) & set(registered):
                self.context.client_info = None

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        await self._storage.set_server_metadata(
            self.context.protected_resource_metadata, self.context.oauth_metadata
        )

    async def _perform_authorization_code_grant(self) -> tuple[str, str]:
        if self._configured_scope is not None:
            # The SDK picks the scope from the server's challenge; a configured one wins.
            self.context.client_metadata.scope = self._configured_scope
        self._choose_token_auth_method()
        return await super()._perform_authorization_code_grant()

    def _choose_token_auth_method(self) -> None:
        """Settle how a pre-registered client with a secret authenticates at the token endpoint.

        A configured method wins; otherwise the first of ``SECRET_AUTH_METHODS`` the
        authorization server lists, and ``client_secret_basic`` when it lists none (the
        RFC 8414 default). A dynamically registered client keeps what the server assigned.
        """
        client = self.context.client_info
        if self._configured_client is None or client is None or not client.client_secret:
            return
        method = self._configured_auth_method
        if method is None:
            metadata = self.context.oauth_metadata
            supported = metadata.token_endpoint_auth_methods_supported if metadata is not None else None
            listed = [candidate for candidate in SECRET_AUTH_METHODS if supported and candidate in supported]
            method = listed[0] if listed else SECRET_AUTH_METHODS[0]
        if client.token_endpoint_auth_method != method:
            self.context.client_info = client.model_copy(update={"token_endpoint_auth_method": method})

    async def _remember_authorize_url(self, url: str) -> None:
        self._authorize_url = url

    async def _wait_for_callback(self) -> AuthorizationCodeResult:
        # Only the interactive flow reaches here, and the SDK always redirects first.
        assert self._callback is not None and self._authorize_url is not None
        url, self._authorize_url = self._authorize_url, None
        callback = self._callback
        result: AuthorizationCodeResult | None = None
        try:
            callback.bind()
            async with anyio.create_task_group() as group:
                group.start_soon(_announce, self._on_authorize_url, url)
                result = await callback.wait_for_code(self._callback_timeout_s)
                group.cancel_scope.cancel()
        except BaseExceptionGroup as failures:
            raise _single_failure(failures) from None
        finally:
            callback.close()
        assert result is not None
        return result

    def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self.interactive:
            return super()._auth_flow(request)
        return self._stored_credentials_flow(request)

    async def _stored_credentials_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        async with self.context.lock:
            if not self._initialized:
                await self._initialize()
            self.context.protocol_version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
            if not self.context.is_token_valid() and self.context.can_refresh_token():
                refresh_response = yield await self._refresh_token()
                await self._handle_refresh_response(refresh_response)
            if self.context.is_token_valid():
                self._add_auth_header(request)
            response = yield request
            if response.status_code == 401 and self.context.can_refresh_token():
                # The server refused a token we believed valid (revoked, or of unknown
                # lifetime): one refresh and one retry before giving up.
                refresh_response = yield await self._refresh_token()
                if await self._handle_refresh_response(refresh_response):
                    self._add_auth_header(request)
                    response = yield request
            if response.status_code == 401 or (response.status_code == 403 and _is_scope_challenge(response)):
                raise self.login_needed_error()


def _is_scope_challenge(response: httpx2.Response) -> bool:
    return "insufficient_scope" in response.headers.get("www-authenticate", "")


def _oauth_setting(settings: Mapping[str, Any], *names: str) -> Any:
    """A value of the ``oauth`` block, under its snake_case or camelCase spelling."""
    for name in names:
        if settings.get(name) not in (None, ""):
            return settings[name]
    return None


def server_url_of(name: str, config: ServerConfig) -> str:
    """The URL of an HTTP server, or a ``ConfigError`` saying why OAuth does not apply."""
    if config.transport not in ("http", "sse"):
        raise ConfigError(
            f'MCP server "{name}" uses the {config.transport} transport; OAuth login applies only to '
            "HTTP and SSE servers",
            server=name,
        )
    if not config.url:
        raise ConfigError(f'MCP server "{name}" has no url; add one to its config entry', server=name)
    return config.url


def _callback_for(name: str, settings: Mapping[str, Any], callback_port: int | None) -> LoopbackCallback:
    redirect_uri = _oauth_setting(settings, "redirect_uri", "redirectUri")
    if redirect_uri is not None:
        parts = urlsplit(str(redirect_uri))
        if parts.scheme != "http" or parts.hostname not in LOOPBACK_HOSTS or parts.port is None:
            raise ConfigError(
                f'MCP server "{name}": oauth.redirect_uri must be http://127.0.0.1:PORT/PATH (a loopback '
                f"address with a port), not {redirect_uri}",
                server=name,
            )
        return LoopbackCallback(
            name,
            port=parts.port,
            path=parts.path or DEFAULT_CALLBACK_PATH,
            host=parts.netloc.rsplit(":", 1)[0],
        )
    port = (
        callback_port
        if callback_port is not None
        else _oauth_setting(settings, "callback_port", "callbackPort")
    )
    try:
        return LoopbackCallback(name, port=int(port) if port is not None else 0)
    except (TypeError, ValueError):
        raise ConfigError(
            f'MCP server "{name}": oauth.callback_port must be a port number, not {port!r}', server=name
        ) from None


def _configured_scope(settings: Mapping[str, Any]) -> str | None:
    scope = _oauth_setting(settings, "scope", "scopes")
    if scope is None:
        return None
    return " ".join(str(item) for item in scope) if isinstance(scope, list | tuple) else str(scope)


def _configured_auth_method(name: str, settings: Mapping[str, Any]) -> str | None:
    method = _oauth_setting(settings, "token_endpoint_auth_method", "tokenEndpointAuthMethod")
    if method is None:
        return None
    if method not in (*SECRET_AUTH_METHODS, "none"):
        raise ConfigError(
            f'MCP server "{name}": oauth.token_endpoint_auth_method must be one of '
            f"{', '.join((*SECRET_AUTH_METHODS, 'none'))}, not {method!r}",
            server=name,
        )
    return str(method)


def _client_credentials_provider(
    name: str, url: str, settings: Mapping[str, Any], scope: str | None
) -> OAuthClientProvider:
    """The machine-to-machine grant: a client secret, or a ``private_key_jwt`` assertion."""
    client_id = _required_setting(name, settings, "client_credentials", "client_id", "clientId")
    issuer = _oauth_setting(settings, "issuer")
    storage = FileTokenStorage(url)
    key_file = _oauth_setting(settings, "private_key_file", "privateKeyFile")
    if key_file is not None:
        try:
            signing_key = Path(str(key_file)).expanduser().read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(
                f'MCP server "{name}": cannot read oauth.private_key_file {key_file}: {error.strerror}',
                server=name,
            ) from None
        assertion = SignedJWTParameters(
            issuer=str(client_id),
            subject=str(client_id),
            signing_key=signing_key,
            signing_algorithm=str(
                _oauth_setting(settings, "signing_algorithm", "signingAlgorithm")
                or DEFAULT_JWT_SIGNING_ALGORITHM
            ),
        )
        return PrivateKeyJWTOAuthProvider(
            url,
            storage,
            str(client_id),
            assertion.create_assertion_provider(),
            scope=scope,
            issuer=str(issuer) if issuer is not None else None,
        )
    client_secret = _oauth_setting(settings, "client_secret", "clientSecret")
    if client_secret is None:
        raise ConfigError(
            f'MCP server "{name}": oauth.grant_type client_credentials needs oauth.client_secret or '
            "oauth.private_key_file",
            server=name,
        )
    post = _configured_auth_method(name, settings) == "client_secret_post"
    return ClientCredentialsOAuthProvider(
        url,
        storage,
        str(client_id),
        str(client_secret),
        token_endpoint_auth_method="client_secret_post" if post else "client_secret_basic",
        scope=scope,
        issuer=str(issuer) if issuer is not None else None,
    )


def _required_setting(name: str, settings: Mapping[str, Any], grant: str, *names: str) -> str:
    value = _oauth_setting(settings, *names)
    if value is None:
        raise ConfigError(
            f'MCP server "{name}": oauth.grant_type {grant} needs oauth.{names[0]}', server=name
        )
    return str(value)


def _identity_assertion_provider(
    name: str, url: str, settings: Mapping[str, Any], scope: str | None
) -> httpx2.Auth:
    """Enterprise-managed authorization (SEP-990): ID token → ID-JAG at the IdP → access token.

    The user's ID token is read from ``oauth.id_token_file`` at each exchange, so the company's
    sign-in tool can keep that file fresh. The MCP authorization server is configuration
    (``oauth.issuer``), never discovered from the MCP server.
    """
    grant = "identity_assertion"
    issuer = _required_setting(name, settings, grant, "issuer")
    idp_token_endpoint = _required_setting(name, settings, grant, "idp_token_endpoint", "idpTokenEndpoint")
    idp_client_id = _required_setting(name, settings, grant, "idp_client_id", "idpClientId")
    idp_client_secret = _oauth_setting(settings, "idp_client_secret", "idpClientSecret")
    id_token_file = Path(
        _required_setting(name, settings, grant, "id_token_file", "idTokenFile")
    ).expanduser()

    async def fetch_identity_assertion(audience: str, resource: str) -> str:
        try:
            id_token = (await anyio.Path(id_token_file).read_text(encoding="utf-8")).strip()
        except OSError as error:
            raise AuthRequiredError(
                f'MCP server "{name}": cannot read the ID token in {id_token_file} ({error.strerror}); '
                "sign in to your identity provider again",
                server=name,
            ) from None
        exchange = {
            "grant_type": TOKEN_EXCHANGE_GRANT,
            "subject_token": id_token,
            "subject_token_type": ID_TOKEN_TYPE,
            "requested_token_type": ID_JAG_TOKEN_TYPE,
            "audience": audience,
            "resource": resource,
            "client_id": idp_client_id,
        }
        if idp_client_secret is not None:
            exchange["client_secret"] = str(idp_client_secret)
        async with httpx2.AsyncClient(timeout=IDP_REQUEST_TIMEOUT_S) as idp:
            response = await idp.post(idp_token_endpoint, data=exchange)
        assertion = response.json().get("access_token") if response.status_code == 200 else None
        if not isinstance(assertion, str):
            raise AuthRequiredError(
                f'MCP server "{name}": the identity provider at {idp_token_endpoint} refused the token '
                f"exchange (HTTP {response.status_code}: {response.text[:200]}); sign in to it again",
                server=name,
            )
        return assertion

    post = _configured_auth_method(name, settings) == "client_secret_post"
    return IdentityAssertionOAuthProvider(
        url,
        FileTokenStorage(url),
        _required_setting(name, settings, grant, "client_id", "clientId"),
        _required_setting(name, settings, grant, "client_secret", "clientSecret"),
        issuer,
        fetch_identity_assertion,
        scope=scope,
        token_endpoint_auth_method="client_secret_post" if post else "client_secret_basic",
    )


def _build_provider(
    name: str,
    config: ServerConfig,
    *,
    interactive: bool,
    on_authorize_url: AuthorizeUrlHandler | None,
    callback: LoopbackCallback | None,
    callback_timeout_s: float,
) -> httpx2.Auth:
    url = server_url_of(name, config)
    settings: Mapping[str, Any] = config.oauth or {}
    scope = _configured_scope(settings)
    grant_type = _oauth_setting(settings, "grant_type", "grantType") or "authorization_code"
    if grant_type == "client_credentials":
        return _client_credentials_provider(name, url, settings, scope)
    if grant_type == "identity_assertion":
        return _identity_assertion_provider(name, url, settings, scope)
    if grant_type != "authorization_code":
        raise ConfigError(
            f'MCP server "{name}": oauth.grant_type must be authorization_code, client_credentials or '
            f"identity_assertion, not {grant_type!r}",
            server=name,
        )
    auth_method = _configured_auth_method(name, settings)
    # A non-interactive connect never redirects anyone, but the SDK wants a redirect URI to
    # describe the client; the loopback default stands in and is never listened on.
    redirect_uri = (
        callback.redirect_uri if callback is not None else f"http://127.0.0.1{DEFAULT_CALLBACK_PATH}"
    )
    client_metadata = OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=scope,
    )
    configured_client: OAuthClientInformationFull | None = None
    client_id = _oauth_setting(settings, "client_id", "clientId")
    if client_id is not None:
        client_secret = _oauth_setting(settings, "client_secret", "clientSecret")
        configured_client = OAuthClientInformationFull(
            client_id=str(client_id),
            client_secret=str(client_secret) if client_secret is not None else None,
            redirect_uris=[AnyUrl(redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            # Settled against the server's metadata once it is known (see _choose_token_auth_method).
            token_endpoint_auth_method=auth_method or ("client_secret_basic" if client_secret else "none"),
            scope=scope,
        )
    metadata_url = _oauth_setting(settings, "client_metadata_url", "clientMetadataUrl")
    if metadata_url is not None and not is_valid_client_metadata_url(str(metadata_url)):
        raise ConfigError(
            f'MCP server "{name}": oauth.client_metadata_url must be an https URL with a path, '
            f"not {metadata_url}",
            server=name,
        )
    return FleetOAuthProvider(
        name,
        url,
        storage=FileTokenStorage(url),
        client_metadata=client_metadata,
        interactive=interactive,
        callback=callback,
        on_authorize_url=on_authorize_url or _print_authorize_url(name),
        callback_timeout_s=callback_timeout_s,
        configured_client=configured_client,
        configured_scope=scope,
        configured_auth_method=auth_method,
        client_metadata_url=str(metadata_url) if metadata_url is not None else None,
    )


def oauth_auth_for(
    name: str,
    config: ServerConfig,
    *,
    interactive: bool = False,
    on_authorize_url: AuthorizeUrlHandler | None = None,
    callback_port: int | None = None,
) -> httpx2.Auth:
    """The ``httpx2.Auth`` to connect to an HTTP server with OAuth.

    Non-interactive (the default): stored tokens, refreshed as needed; a connect that would
    need a person raises ``AuthRequiredError`` naming ``mcpfleet login NAME``. Interactive:
    the full flow, with the authorization URL handed to ``on_authorize_url`` (printed on
    stderr when not given) and a loopback callback on ``callback_port`` (or the configured
    one, or a free one).
    """
    settings: Mapping[str, Any] = config.oauth or {}
    callback = _callback_for(name, settings, callback_port) if interactive else None
    return _build_provider(
        name,
        config,
        interactive=interactive,
        on_authorize_url=on_authorize_url,
        callback=callback,
        callback_timeout_s=DEFAULT_LOGIN_TIMEOUT_S,
    )


async def login(
    name: str,
    config: ServerConfig,
    *,
    on_authorize_url: AuthorizeUrlHandler,
    timeout_s: float = DEFAULT_LOGIN_TIMEOUT_S,
    cwd: Path | None = None,
) -> None:
    """Log in to an HTTP server and store its tokens, then connect once to prove they work.

    Any previous tokens of the server are dropped first (its client registration is kept
    when its redirect URI still applies). ``cwd`` is the project root the connection check
    runs in (default: the current directory). Raises ``LoginError`` when the flow fails or times
    out, ``ConfigError`` when the server is not an HTTP server.
    """
    url = server_url_of(name, config)
    callback = _callback_for(name, config.oauth or {}, None)
    try:
        callback.bind()
        provider = _build_provider(
            name,
            config,
            interactive=True,
            on_authorize_url=on_authorize_url,
            callback=callback,
            callback_timeout_s=timeout_s,
        )
        await FileTokenStorage(url).forget_tokens()
        handshake_s = config.effective_timeout_ms / 1000 if config.effective_timeout_ms else None
        with anyio.fail_after(timeout_s + handshake_s if handshake_s is not None else None):
            await _initialize_once(name, config, provider, cwd if cwd is not None else Path.cwd())
    except TimeoutError:
        raise LoginError(
            f'Login to MCP server "{name}" did not finish within {timeout_s:g}s; run the login again',
            server=name,
        ) from None
    finally:
        callback.close()


async def _initialize_once(name: str, config: ServerConfig, auth: httpx2.Auth, cwd: Path) -> None:
    """Connect (``initialize``) with ``auth`` and close: the 401 on the way is what starts the flow."""
    from mcp.client.auth import OAuthFlowError

    from mcpfleet.client.opening import open_connection

    try:
        try:
            async with anyio.create_task_group() as group:
                # The handshake waits for a person here; ``login`` bounds the whole of it instead.
                connection = await open_connection(group, name, config, cwd=cwd, timeout_ms=0, auth=auth)
                await connection.close()
        except BaseExceptionGroup as failures:
            raise _single_failure(failures) from None
    except ConnectError as error:
        if isinstance(error, LoginError | AuthRequiredError):
            raise
        oauth_error = _find_in_chain(error, OAuthFlowError)
        if oauth_error is None:
            raise
        raise LoginError(f'Login to MCP server "{name}" failed: {oauth_error}', server=name) from error


def _single_failure(failures: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one failure a task group wrapped (our task groups run one task that can fail),
    so callers see ``LoginError`` itself rather than a group."""
    return failures.exceptions[0] if len(failures.exceptions) == 1 else failures


def _find_in_chain(error: BaseException, wanted: type[Exception]) -> Exception | None:
    """The first ``wanted`` among ``error``, its causes and contexts."""
    current: BaseException | None = error
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        if isinstance(current, wanted):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def logout(name: str, config: ServerConfig) -> bool:
    """Forget the tokens and the client registration stored for the server's URL;
    ``True`` if there was something to forget."""
    return FileTokenStorage(server_url_of(name, config)).clear()
