"""The OAuth client of an HTTP server: the SDK's provider, set up for mcpfleet's two situations.

- A connect (manager, agent session) must never wait for a person: it uses stored tokens,
  refreshes them when they expire, and otherwise fails with ``AuthRequiredError`` telling
  the user to run ``mcpfleet login NAME``.
- ``mcpfleet login NAME`` (``login.py``) runs the whole flow: metadata discovery, dynamic
  client registration or a client ID metadata document, PKCE, the loopback callback
  (``loopback.py``), the token exchange.

The discovery, registration, PKCE and refresh requests are the SDK's
(``OAuthClientProvider``); this module adds persistence (``storage.py``), the callback and
the non-interactive policy, through private methods of the SDK's provider that
``mcpfleet.client._sdk`` names. ``oauth_auth_for`` is the one entry: it reads the settings
(``settings.py``) and builds the provider of their grant (``grants.py`` for the two that need
no person).
"""

from __future__ import annotations

import inspect
import logging
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import AnyUrl

from mcpfleet.auth.grants import client_credentials_provider, identity_assertion_provider
from mcpfleet.auth.loopback import LoopbackCallback
from mcpfleet.auth.settings import (
    DEFAULT_CALLBACK_PATH,
    SECRET_AUTH_METHODS,
    OAuthSettings,
    server_url_of,
)
from mcpfleet.auth.storage import CredentialStore, FileTokenStorage
from mcpfleet.client._sdk import (
    oauth_add_bearer,
    oauth_apply_refresh,
    oauth_is_initialized,
    oauth_refresh_request,
)
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import AuthRequiredError, LoginError

logger = logging.getLogger(__name__)

AuthorizeUrlHandler = Callable[[str], Awaitable[None] | None]

CLIENT_NAME = "mcpfleet"
DEFAULT_LOGIN_TIMEOUT_S = 300.0
REFRESH_SKEW_S = 60
"""Tokens loaded from disk are refreshed this long before they expire, so a request never
leaves with a token that dies in flight."""
SDK_OAUTH_LOGGER = "mcp.client.auth.oauth2"


class _OwnErrorsFilter(logging.Filter):
    """Drop the SDK's traceback log of an mcpfleet auth error: the caller reports that error
    in one clear line, so the log would only repeat it as a stack trace."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, AuthRequiredError | LoginError)


_own_errors_filter = _OwnErrorsFilter()


def quiet_sdk_auth_tracebacks() -> None:
    """Keep the SDK's OAuth logger from repeating mcpfleet's auth errors as tracebacks
    (idempotent: the filter is installed once)."""
    sdk_logger = logging.getLogger(SDK_OAUTH_LOGGER)
    if _own_errors_filter not in sdk_logger.filters:
        sdk_logger.addFilter(_own_errors_filter)


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
    settings = OAuthSettings.parse(name, config.oauth).with_callback_port(callback_port)
    callback = LoopbackCallback.from_settings(name, settings.callback) if interactive else None
    return build_provider(
        server_url_of(name, config),
        settings,
        interactive=interactive,
        on_authorize_url=on_authorize_url,
        callback=callback,
        callback_timeout_s=DEFAULT_LOGIN_TIMEOUT_S,
    )


def build_provider(
    url: str,
    settings: OAuthSettings,
    *,
    interactive: bool,
    on_authorize_url: AuthorizeUrlHandler | None,
    callback: LoopbackCallback | None,
    callback_timeout_s: float,
) -> httpx2.Auth:
    """The provider of the settings' grant for the server at ``url``."""
    quiet_sdk_auth_tracebacks()
    if settings.grant_type == "client_credentials":
        return client_credentials_provider(url, settings)
    if settings.grant_type == "identity_assertion":
        return identity_assertion_provider(url, settings)
    name = settings.server
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
        scope=settings.scope,
    )
    configured_client: OAuthClientInformationFull | None = None
    if settings.client_id is not None:
        secret = settings.client_secret
        configured_client = OAuthClientInformationFull(
            client_id=settings.client_id,
            client_secret=secret,
            redirect_uris=[AnyUrl(redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            # Settled against the server's metadata once it is known (see _choose_token_auth_method).
            token_endpoint_auth_method=settings.token_endpoint_auth_method
            or ("client_secret_basic" if secret else "none"),
            scope=settings.scope,
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
        configured_scope=settings.scope,
        configured_auth_method=settings.token_endpoint_auth_method,
        client_metadata_url=settings.client_metadata_url,
    )


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
        storage: CredentialStore,
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
        failure: BaseException | None = None
        try:
            callback.bind()
            async with anyio.create_task_group() as group:
                group.start_soon(_announce, self._on_authorize_url, url)
                result = await callback.wait_for_code(self._callback_timeout_s)
                group.cancel_scope.cancel()
        except BaseExceptionGroup as failures:
            # One of the two tasks failed (the wait, or the host's handler): that failure
            # itself, raised below outside this handler so it keeps its own cause.
            if len(failures.exceptions) != 1:
                raise
            failure = failures.exceptions[0]
        finally:
            callback.close()
        if failure is not None:
            raise failure
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
            if not oauth_is_initialized(self):
                await self._initialize()
            self.context.protocol_version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
            if not self.context.is_token_valid() and self.context.can_refresh_token():
                refresh_response = yield await oauth_refresh_request(self)
                await oauth_apply_refresh(self, refresh_response)
            if self.context.is_token_valid():
                oauth_add_bearer(self, request)
            response = yield request
            if response.status_code == 401 and self.context.can_refresh_token():
                # The server refused a token we believed valid (revoked, or of unknown
                # lifetime): one refresh and one retry before giving up.
                refresh_response = yield await oauth_refresh_request(self)
                if await oauth_apply_refresh(self, refresh_response):
                    oauth_add_bearer(self, request)
                    response = yield request
            if response.status_code == 401 or (response.status_code == 403 and _is_scope_challenge(response)):
                raise self.login_needed_error()


def _is_scope_challenge(response: httpx2.Response) -> bool:
    return "insufficient_scope" in response.headers.get("www-authenticate", "")


__all__ = ["FleetOAuthProvider", "build_provider", "oauth_auth_for", "quiet_sdk_auth_tracebacks"]
