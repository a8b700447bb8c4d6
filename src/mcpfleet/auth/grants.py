"""The two grants that need no person, built on the SDK's providers; they run wherever a
connect happens.

- ``client_credentials``: a client secret, or a ``private_key_jwt`` assertion signed with a
  configured key.
- ``identity_assertion`` (enterprise-managed authorization, SEP-990): the user's ID token from
  the company identity provider is exchanged there for an identity assertion grant, which the
  MCP authorization server turns into a token.
"""

from __future__ import annotations

from typing import Literal

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

from mcpfleet.auth.settings import OAuthSettings
from mcpfleet.auth.storage import FileTokenStorage
from mcpfleet.errors import AuthRequiredError, ConfigError

TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
IDP_REQUEST_TIMEOUT_S = 30.0


def client_credentials_provider(url: str, settings: OAuthSettings) -> OAuthClientProvider:
    """The machine-to-machine grant: a client secret, or a ``private_key_jwt`` assertion."""
    name = settings.server
    client_id = settings.required("client_id")
    storage = FileTokenStorage(url)
    key_file = settings.private_key_file
    if key_file is not None:
        try:
            signing_key = key_file.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(
                f'MCP server "{name}": cannot read oauth.private_key_file {key_file}: {error.strerror}',
                server=name,
            ) from error
        assertion = SignedJWTParameters(
            issuer=client_id,
            subject=client_id,
            signing_key=signing_key,
            signing_algorithm=settings.signing_algorithm,
        )
        return PrivateKeyJWTOAuthProvider(
            url,
            storage,
            client_id,
            assertion.create_assertion_provider(),
            scope=settings.scope,
            issuer=settings.issuer,
        )
    return ClientCredentialsOAuthProvider(
        url,
        storage,
        client_id,
        settings.required("client_secret"),
        token_endpoint_auth_method=_secret_auth_method(settings),
        scope=settings.scope,
        issuer=settings.issuer,
    )


def identity_assertion_provider(url: str, settings: OAuthSettings) -> httpx2.Auth:
    """Enterprise-managed authorization (SEP-990): ID token → ID-JAG at the IdP → access token.

    The user's ID token is read from ``oauth.id_token_file`` at each exchange, so the company's
    sign-in tool can keep that file fresh. The MCP authorization server is configuration
    (``oauth.issuer``), never discovered from the MCP server.
    """
    name = settings.server
    idp_token_endpoint = settings.required("idp_token_endpoint")
    idp_client_id = settings.required("idp_client_id")
    idp_client_secret = settings.idp_client_secret
    id_token_file = anyio.Path(settings.required("id_token_file"))

    async def fetch_identity_assertion(audience: str, resource: str) -> str:
        try:
            id_token = (await id_token_file.read_text(encoding="utf-8")).strip()
        except OSError as error:
            raise AuthRequiredError(
                f'MCP server "{name}": cannot read the ID token in {id_token_file} ({error.strerror}); '
                "sign in to your identity provider again",
                server=name,
            ) from error
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
            exchange["client_secret"] = idp_client_secret
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

    return IdentityAssertionOAuthProvider(
        url,
        FileTokenStorage(url),
        settings.required("client_id"),
        settings.required("client_secret"),
        settings.required("issuer"),
        fetch_identity_assertion,
        scope=settings.scope,
        token_endpoint_auth_method=_secret_auth_method(settings),
    )


def _secret_auth_method(settings: OAuthSettings) -> Literal["client_secret_basic", "client_secret_post"]:
    """``client_secret_post`` when configured, else ``client_secret_basic``."""
    post = settings.token_endpoint_auth_method == "client_secret_post"
    return "client_secret_post" if post else "client_secret_basic"


__all__ = ["client_credentials_provider", "identity_assertion_provider"]
