"""The ``oauth`` settings that choose a grant: each mistake is a ConfigError naming the setting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcpfleet.auth.provider import oauth_auth_for
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import ConfigError


def config_with(oauth: dict[str, Any]) -> ServerConfig:
    return ServerConfig(name="remote", transport="http", url="https://mcp.example.com/mcp", oauth=oauth)


@pytest.mark.parametrize(
    ("oauth", "named"),
    [
        ({"grant_type": "password"}, "oauth.grant_type"),
        ({"grant_type": "client_credentials"}, "oauth.client_id"),
        ({"grant_type": "client_credentials", "client_id": "c"}, "oauth.client_secret"),
        (
            {
                "grant_type": "client_credentials",
                "client_id": "c",
                "private_key_file": "/nonexistent/key.pem",
            },
            "oauth.private_key_file",
        ),
        ({"grant_type": "identity_assertion", "client_id": "c", "client_secret": "s"}, "oauth.issuer"),
        ({"client_metadata_url": "http://example.com/client.json"}, "oauth.client_metadata_url"),
        (
            {"client_id": "c", "client_secret": "s", "token_endpoint_auth_method": "magic"},
            "oauth.token_endpoint_auth_method",
        ),
    ],
)
def test_unusable_oauth_settings_are_config_errors(oauth: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named) as raised:
        oauth_auth_for("remote", config_with(oauth))
    assert '"remote"' in str(raised.value)


ISSUER = "https://auth.example.com"


@pytest.mark.parametrize(
    ("oauth", "provider"),
    [
        (
            {"grant_type": "client_credentials", "client_id": "c", "client_secret": "s", "issuer": ISSUER},
            "ClientCredentialsOAuthProvider",
        ),
        (
            {"grantType": "client_credentials", "clientId": "c", "privateKeyFile": "KEY", "issuer": ISSUER},
            "PrivateKeyJWTOAuthProvider",
        ),
        (
            {
                "grant_type": "identity_assertion",
                "issuer": ISSUER,
                "client_id": "c",
                "client_secret": "s",
                "idp_token_endpoint": "https://idp.example.com/token",
                "idp_client_id": "idp-client",
                "id_token_file": "/run/user/id-token",
            },
            "IdentityAssertionOAuthProvider",
        ),
        ({"client_metadata_url": "https://app.example.com/client-metadata.json"}, "FleetOAuthProvider"),
    ],
)
def test_each_grant_gets_its_provider(oauth: dict[str, Any], provider: str, tmp_path: Path) -> None:
    if oauth.get("privateKeyFile") == "KEY":
        key = tmp_path / "key.pem"
        key.write_text("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n")
        oauth = {**oauth, "privateKeyFile": str(key)}
    assert type(oauth_auth_for("remote", config_with(oauth))).__name__ == provider
