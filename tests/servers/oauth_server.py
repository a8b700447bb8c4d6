"""A real OAuth-protected MCP server for tests, run as a subprocess on 127.0.0.1.

One process is both the authorization server and the resource server, built on the SDK's
own auth pieces: protected-resource metadata, authorization-server metadata, dynamic
client registration, ``/authorize``, ``/token`` (authorization code with PKCE, refresh
token) and bearer checks on the MCP endpoint, which answers 401 with a
``resource_metadata`` challenge without a valid token.

``/authorize`` approves at once and redirects to the client's ``redirect_uri`` with the
code and state: it stands in for the user clicking "allow" in a browser. The user who signs
in is whoever the ``X-Test-User`` header of that request names (the stand-in for the
authorization server's own sign-in session in that browser); the tokens issued for the code
are that user's, and the ``whoami`` tool answers ``authenticated as USER`` (``authenticated``
for a sign-in that named nobody).

Usage: ``python oauth_server.py [--access-token-ttl SECONDS] [--transport streamable-http|sse]``.
The server binds a free port itself and prints ``READY <port>`` on stdout once it
listens. ``GET /test/stats`` returns counters the tests assert on;
``POST /test/revoke-access-tokens`` forgets every access token (refresh tokens survive);
``POST /test/expire-access-tokens`` makes every access token expired (refresh tokens survive);
``GET /test/token-works?refresh_token=…`` says whether a refresh token is still live. Tokens
can be revoked at ``/revoke`` (RFC 7009).
"""

from __future__ import annotations

import argparse
import contextvars
import secrets
import socket
import sys
import time
import warnings
from typing import Any

import anyio
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    IdentityAssertionParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

SCOPE = "mcp"
USER_HEADER = b"x-test-user"

signing_in: contextvars.ContextVar[str | None] = contextvars.ContextVar("signing_in", default=None)
"""The user whose browser is at ``/authorize`` in this request (its ``X-Test-User``)."""


class SignInHeader:
    """Reads who signs in from ``X-Test-User`` on ``/authorize``, for the provider to record."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = None
        if scope["type"] == "http" and scope["path"] == "/authorize":
            found = [value for name, value in scope["headers"] if name == USER_HEADER]
            user = found[0].decode() if found else None
        reset = signing_in.set(user)
        try:
            await self.app(scope, receive, send)
        finally:
            signing_in.reset(reset)


class AutoApprovingProvider:
    """An in-memory authorization server that approves every authorization request."""

    def __init__(self, access_token_ttl_s: int) -> None:
        self.access_token_ttl_s = access_token_ttl_s
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access_tokens: dict[str, AccessToken] = {}
        self.refresh_tokens: dict[str, RefreshToken] = {}
        self.users: dict[str, str | None] = {}
        """Who each code, access token and refresh token was issued to."""
        self.stats: dict[str, int] = {
            "registrations": 0,
            "authorizations": 0,
            "code_exchanges": 0,
            "refreshes": 0,
            "revocations": 0,
        }

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        self.stats["registrations"] += 1

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = AuthorizationCode(
            code=secrets.token_urlsafe(32),
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.codes[code.code] = code
        self.users[code.code] = signing_in.get()
        self.stats["authorizations"] += 1
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        code = self.codes.get(authorization_code)
        return code if code is not None and code.client_id == client.client_id else None

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        if self.codes.pop(authorization_code.code, None) is None:
            raise TokenError("invalid_grant", "authorization code already used")
        self.stats["code_exchanges"] += 1
        user = self.users.pop(authorization_code.code, None)
        return self._issue(
            client.client_id or "", authorization_code.scopes, authorization_code.resource, user
        )

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        token = self.refresh_tokens.get(refresh_token)
        return token if token is not None and token.client_id == client.client_id else None

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        # Rotation: a refresh token works once.
        if self.refresh_tokens.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "refresh token already used")
        self.stats["refreshes"] += 1
        user = self.users.pop(refresh_token.token, None)
        return self._issue(client.client_id or "", scopes, refresh_token.resource, user)

    async def load_access_token(self, token: str) -> AccessToken | None:
        access = self.access_tokens.get(token)
        if access is None or (access.expires_at is not None and access.expires_at < time.time()):
            return None
        return access

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access_tokens.pop(token.token, None)
        self.refresh_tokens.pop(token.token, None)
        self.stats["revocations"] += 1

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        # SEP-990's jwt-bearer grant is not part of what mcpfleet logs in with.
        raise TokenError(error="unsupported_grant_type", error_description="no jwt-bearer grant here")

    def _issue(self, client_id: str, scopes: list[str], resource: str | None, user: str | None) -> OAuthToken:
        access = secrets.token_urlsafe(32)
        refresh = secrets.token_urlsafe(32)
        self.users[access] = self.users[refresh] = user
        self.access_tokens[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + self.access_token_ttl_s,
            resource=resource,
        )
        self.refresh_tokens[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            expires_in=self.access_token_ttl_s,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )


def build_server(base_url: str, transport: str, provider: AutoApprovingProvider) -> MCPServer:
    resource_path = "/mcp" if transport == "streamable-http" else "/sse"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        auth = AuthSettings(
            issuer_url=base_url,  # type: ignore[arg-type]
            resource_server_url=f"{base_url}{resource_path}",  # type: ignore[arg-type]
            client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE]),
            revocation_options=RevocationOptions(enabled=True),
            required_scopes=[SCOPE],
            validate_token_resource=False,
        )
    server = MCPServer("oauth-test-server", auth=auth, auth_server_provider=provider)

    @server.tool()
    def whoami() -> str:
        """Say that the caller got through the bearer check, and as whom."""
        access = get_access_token()
        user = provider.users.get(access.token) if access is not None else None
        return f"authenticated as {user}" if user is not None else "authenticated"

    async def stats(request: Request) -> Response:
        return JSONResponse(provider.stats)

    async def revoke_access_tokens(request: Request) -> Response:
        provider.access_tokens.clear()
        return JSONResponse({"ok": True})

    async def token_works(request: Request) -> Response:
        return JSONResponse({"live": request.query_params.get("refresh_token") in provider.refresh_tokens})

    async def expire_access_tokens(request: Request) -> Response:
        for token in provider.access_tokens.values():
            token.expires_at = int(time.time()) - 1
        return JSONResponse({"ok": True})

    # The SDK's custom_route is untyped: called rather than used as a decorator, it leaves the
    # handlers' types to the type checker.
    server.custom_route("/test/stats", methods=["GET"])(stats)
    server.custom_route("/test/revoke-access-tokens", methods=["POST"])(revoke_access_tokens)
    server.custom_route("/test/expire-access-tokens", methods=["POST"])(expire_access_tokens)
    server.custom_route("/test/token-works", methods=["GET"])(token_works)

    return server


async def serve(access_token_ttl_s: int, transport: str) -> None:
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", 0))
    listening.listen(128)
    port: int = listening.getsockname()[1]
    base_url = f"http://127.0.0.1:{port}"
    provider = AutoApprovingProvider(access_token_ttl_s)
    server = build_server(base_url, transport, provider)
    app: Any = server.streamable_http_app() if transport == "streamable-http" else server.sse_app()
    config = uvicorn.Config(SignInHeader(app), log_level="warning", lifespan="on")
    uvicorn_server = uvicorn.Server(config)
    print(f"READY {port}", flush=True)
    await uvicorn_server.serve(sockets=[listening])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--access-token-ttl", type=int, default=3600)
    parser.add_argument("--transport", choices=["streamable-http", "sse"], default="streamable-http")
    options = parser.parse_args()
    try:
        anyio.run(serve, options.access_token_ttl, options.transport)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
