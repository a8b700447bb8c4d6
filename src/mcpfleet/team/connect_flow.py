"""A user's OAuth flow with an upstream server, run by the team gateway on that user's behalf.

``mcpfleet login`` runs the authorization-code + PKCE flow for the local user with a loopback
callback; a team gateway runs the same flow (the SDK's provider with mcpfleet's policy,
``mcpfleet.auth.provider``) for each signed-in user, with the gateway's own callback page:

1. the user presses "Connect" on ``/connect/<server>``; ``ConnectFlows.start`` opens a
   connection to the upstream server with an interactive provider whose storage is that
   user's sealed row; the upstream's 401 starts discovery, dynamic client registration (one
   registration per user, kept in the row) and PKCE, and the authorization URL comes back
   to the page, which redirects the browser there;
2. the upstream authorization server sends the browser back to
   ``/connect/<server>/callback?code=…&state=…``; ``ConnectFlows.callback`` hands the code to
   the waiting flow, which exchanges it, stores the tokens sealed and proves them with the
   connection's handshake. The callback may land on another replica than the flow's: it is then
   handed to the flow's replica through the shared state (``team.connect_handoff``).

A pending flow is bound to its user and server (a callback from anyone else is refused), is
used once (its ``state`` is forgotten when the code arrives), and expires after
``CONNECT_FLOW_TIMEOUT_S``. While it runs, the user's earlier tokens stay as they were: a flow
left unfinished takes nothing away.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from mcp.shared.exceptions import UrlElicitationRequiredError
from mcp_types import ElicitRequestURLParams
from pydantic import AnyUrl

from mcpfleet.auth.provider import CLIENT_NAME, FleetOAuthProvider, quiet_sdk_auth_tracebacks
from mcpfleet.auth.settings import OAuthSettings, server_url_of
from mcpfleet.client.opening import connect_to_server
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import AuthRequiredError, LoginError
from mcpfleet.redaction import redact_text
from mcpfleet.team.connect_handoff import (
    CONNECTED,
    NOT_YOURS,
    UNKNOWN,
    Callback,
    CallbackOutcome,
    ConnectHandoff,
)
from mcpfleet.team.credentials import SealedCredentialStore
from mcpfleet.team.sealing import Sealer
from mcpfleet.team.shared import TeamShared
from mcpfleet.team.state import TeamStateError

logger = logging.getLogger(__name__)

CONNECT_FLOW_TIMEOUT_S = 600.0
"""How long a user has between "Connect" and the upstream's callback."""
AUTHORIZE_URL_TIMEOUT_S = 30.0
"""How long discovery and registration at the upstream may take before the page gives up."""
CALLBACK_RESULT_TIMEOUT_S = 30.0
"""How long the callback page waits for the token exchange and the proving handshake."""
MAX_PENDING_FLOWS_PER_USER = 8
"""Flows one user may have waiting at once (each holds a connection attempt open)."""


class ConnectRequiredError(AuthRequiredError):
    """A per-user server was called by a user who has no usable credentials for it; the
    message carries the ``/connect/<server>`` link that gets some."""

    def __init__(self, server: str, url: str) -> None:
        super().__init__(
            f'MCP server "{server}" uses your own account: open {url} to connect it, then call again',
            server=server,
        )
        self.url = url


class TeamOAuthProvider(FleetOAuthProvider):
    """mcpfleet's OAuth client for one user of a team gateway, on that user's sealed row.

    Interactive (driven by a pending ``flow``): the redirect goes to that user's browser
    through the connect page, and the code comes back through the callback page. Not
    interactive: stored tokens, refreshed when they expire; ``ConnectRequiredError`` (with the
    ``/connect/<server>`` link) when only the user can help.
    """

    def __init__(
        self,
        server: str,
        config: ServerConfig,
        store: SealedCredentialStore,
        *,
        redirect_uri: str,
        connect_url: str,
        flow: PendingConnect | None = None,
    ) -> None:
        quiet_sdk_auth_tracebacks()
        settings = OAuthSettings.parse(server, config.oauth)
        metadata = OAuthClientMetadata(
            client_name=CLIENT_NAME,
            redirect_uris=[AnyUrl(redirect_uri)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope=settings.scope,
        )
        super().__init__(
            server,
            server_url_of(server, config),
            storage=store,
            client_metadata=metadata,
            interactive=flow is not None,
            callback=None,
            on_authorize_url=_ignore_url,
            callback_timeout_s=CONNECT_FLOW_TIMEOUT_S,
            configured_client=_configured_client(settings, redirect_uri),
            configured_auth_method=settings.token_endpoint_auth_method,
            configured_scope=settings.scope,
            client_metadata_url=settings.client_metadata_url,
        )
        self.connect_url = connect_url
        self._flow = flow

    def login_needed_error(self) -> AuthRequiredError:
        return ConnectRequiredError(self.server_name, self.connect_url)

    async def _remember_authorize_url(self, url: str) -> None:
        assert self._flow is not None
        self._flow.offer_authorize_url(url)

    async def _wait_for_callback(self) -> AuthorizationCodeResult:
        assert self._flow is not None
        return await self._flow.wait_for_code()


def connect_elicitation(error: ConnectRequiredError) -> UrlElicitationRequiredError:
    """The answer to a call that needs the user's connect, for a client that declared URL-mode
    elicitation: the ``-32042`` error whose elicitation is the ``/connect/<server>`` page (the
    client shows it and offers to open it; the user calls again once connected)."""
    elicitation = ElicitRequestURLParams(
        message=str(error), url=error.url, elicitation_id=f"connect-{secrets.token_urlsafe(12)}"
    )
    return UrlElicitationRequiredError([elicitation], message=str(error))


def _configured_client(settings: OAuthSettings, redirect_uri: str) -> OAuthClientInformationFull | None:
    """The client registered beforehand at the upstream (``oauth.client_id``, and its secret),
    shared by every user: what providers without dynamic registration (GitHub's OAuth apps)
    need. Its redirect URI there is the server's callback page."""
    if settings.client_id is None:
        return None
    secret = settings.client_secret
    return OAuthClientInformationFull(
        client_id=settings.client_id,
        client_secret=secret,
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method=settings.token_endpoint_auth_method
        or ("client_secret_basic" if secret else "none"),
        scope=settings.scope,
    )


def _ignore_url(url: str) -> None:
    """The authorization URL reaches the user through ``PendingConnect``, not through this."""


@dataclass(eq=False)
class PendingConnect:
    """One user's flow with one server, from "Connect" to its callback."""

    user: str
    server: str
    expires_at: float
    """``time.monotonic()`` past which the callback is refused."""
    authorize_url: str | None = None
    state: str | None = None
    connected: bool = False
    failure: str | None = None
    """Why the flow ended without tokens (one line, nothing secret in it)."""
    _code: AuthorizationCodeResult | None = None
    _url_offered: anyio.Event = field(default_factory=anyio.Event)
    _code_arrived: anyio.Event = field(default_factory=anyio.Event)
    _finished: anyio.Event = field(default_factory=anyio.Event)

    def offer_authorize_url(self, url: str) -> None:
        self.authorize_url = url
        found = parse_qs(urlsplit(url).query).get("state")
        self.state = found[0] if found else None
        self._url_offered.set()

    async def wait_for_code(self) -> AuthorizationCodeResult:
        await self._code_arrived.wait()
        if self._code is None:
            raise LoginError(f'The connect flow of "{self.server}" was abandoned', server=self.server)
        return self._code

    def deliver(self, code: AuthorizationCodeResult | None, failure: str | None = None) -> None:
        """The callback's answer: a code, or the authorization server's refusal."""
        self._code = code
        if failure is not None:
            self.failure = failure
        self._code_arrived.set()

    def finish(self, failure: str | None) -> None:
        if failure is not None and self.failure is None:
            self.failure = failure
        self.connected = failure is None and self.failure is None
        self._url_offered.set()
        self._code_arrived.set()
        self._finished.set()

    async def wait_for_url(self) -> None:
        with anyio.move_on_after(AUTHORIZE_URL_TIMEOUT_S):
            await self._url_offered.wait()

    async def wait_finished(self) -> None:
        with anyio.move_on_after(CALLBACK_RESULT_TIMEOUT_S):
            await self._finished.wait()


Connected = Callable[[str, str], Awaitable[None]]
"""Told ``(user, server)`` once a flow has stored new tokens (the pool drops the old connection)."""


class ConnectFlows:
    """The pending flows of a team gateway replica, keyed by their ``state``; each flow's task
    runs in the gateway's task group, and its callback is handed to it from any replica."""

    def __init__(
        self,
        task_group: anyio.abc.TaskGroup,
        *,
        cwd: Path,
        on_connected: Connected,
        shared: TeamShared,
        sealer: Sealer,
    ) -> None:
        self._task_group = task_group
        self._cwd = cwd
        self._on_connected = on_connected
        self._by_state: dict[str, PendingConnect] = {}
        self._running: set[PendingConnect] = set()
        self.handoff = ConnectHandoff(shared, sealer, task_group, self.answer_here)

    async def start(
        self,
        user: str,
        server: str,
        config: ServerConfig,
        store: SealedCredentialStore,
        *,
        redirect_uri: str,
        connect_url: str,
    ) -> PendingConnect:
        """Start a flow; returns once its authorization URL is known, or it failed (``failure``)."""
        if sum(1 for flow in self._running if flow.user == user) >= MAX_PENDING_FLOWS_PER_USER:
            flow = PendingConnect(user, server, expires_at=0)
            flow.finish("too many connects are waiting for you; finish or close one, then try again")
            return flow
        flow = PendingConnect(user, server, expires_at=time.monotonic() + CONNECT_FLOW_TIMEOUT_S)
        # The flow reads no stored tokens (it is there to get new ones) but writes to the row.
        fresh = _FreshTokens(store.state, store.sealer, user, server)
        provider = TeamOAuthProvider(
            server, config, fresh, redirect_uri=redirect_uri, connect_url=connect_url, flow=flow
        )
        self._running.add(flow)
        self._task_group.start_soon(self._run, flow, config, provider, name=f"mcpfleet connect {server}")
        await flow.wait_for_url()
        if flow.state is not None and flow.failure is None:
            try:
                await self.handoff.announce(flow.state, user, server, CONNECT_FLOW_TIMEOUT_S)
            except TeamStateError as error:
                logger.warning('The connect of user "%s" to "%s" was not started: %s', user, server, error)
                flow.deliver(None)
                flow.finish(
                    "the gateway cannot reach its shared state (Redis), so a sign-in started now could "
                    "not be finished; try again once it is back"
                )
                return flow
            self._by_state[flow.state] = flow
        elif flow.failure is None:
            flow.deliver(None)
            flow.finish(f"the authorization server of {server} did not answer in time; try again")
        return flow

    def pending_for(self, state: str) -> PendingConnect | None:
        flow = self._by_state.get(state)
        if flow is not None and time.monotonic() > flow.expires_at:
            self._forget(flow)
            flow.deliver(None, "this connect link has expired; start again")
            return None
        return flow

    async def callback(self, callback: Callback) -> CallbackOutcome:
        """Finish the flow ``callback`` belongs to, on this replica or the one running it."""
        flow = self.pending_for(callback.state)
        if flow is None:
            return await self.handoff.hand_over(callback)
        return await self._finish(flow, callback)

    async def answer_here(self, callback: Callback) -> CallbackOutcome:
        """Finish ``callback`` with a flow of this replica (one another replica handed over)."""
        flow = self.pending_for(callback.state)
        return UNKNOWN if flow is None else await self._finish(flow, callback)

    async def _finish(self, flow: PendingConnect, callback: Callback) -> CallbackOutcome:
        if flow.server != callback.server:
            return UNKNOWN
        if flow.user != callback.user:
            return NOT_YOURS  # left pending: its own user may still come back with it
        await self.complete(flow, callback.code, callback.failure)
        if flow.connected:
            return CONNECTED
        return CallbackOutcome(502, flow.failure or "the connect did not finish")

    async def complete(
        self, flow: PendingConnect, code: AuthorizationCodeResult | None, failure: str | None
    ) -> None:
        """Hand the callback's answer to its flow (once) and wait for the flow's end."""
        self._forget(flow)
        flow.deliver(code, failure)
        await flow.wait_finished()

    async def _run(self, flow: PendingConnect, config: ServerConfig, provider: TeamOAuthProvider) -> None:
        failure: str | None = None
        try:
            with anyio.fail_after(CONNECT_FLOW_TIMEOUT_S):
                # The handshake waits for a person here; the flow's deadline bounds it instead.
                async with connect_to_server(flow.server, config, cwd=self._cwd, timeout_ms=0, auth=provider):
                    pass
            await self._on_connected(flow.user, flow.server)
        except TimeoutError:
            failure = "the connect was not finished in time; start again"
        except Exception as error:
            failure = _reason(error, flow.server)
            logger.info('The connect of user "%s" to "%s" failed: %s', flow.user, flow.server, failure)
        finally:
            self._running.discard(flow)
            self._forget(flow)
            flow.finish(failure)
            if flow.state is not None:
                await self.handoff.withdraw(flow.state)

    def _forget(self, flow: PendingConnect) -> None:
        if flow.state is not None and self._by_state.get(flow.state) is flow:
            del self._by_state[flow.state]


def _reason(error: Exception, server: str) -> str:
    """One line for the callback page: the error's first line, masked like any text the gateway
    writes (an upstream's answer may echo what it was sent), without the local ``mcpfleet
    login`` advice of the client's messages (here the page itself is the way to try again)."""
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    text = text.removesuffix(f"; run: mcpfleet login {server}")
    return redact_text(text)


class _FreshTokens(SealedCredentialStore):
    """The user's row as a connect flow sees it: no tokens to start from (it gets new ones),
    the rest (registration, metadata) reused, and what it writes written."""

    async def get_tokens(self) -> OAuthToken | None:
        return None


__all__ = [
    "CONNECT_FLOW_TIMEOUT_S",
    "ConnectFlows",
    "ConnectRequiredError",
    "PendingConnect",
    "TeamOAuthProvider",
    "connect_elicitation",
]
