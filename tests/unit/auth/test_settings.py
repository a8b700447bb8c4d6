"""The ``oauth`` block read into ``OAuthSettings``: both spellings, defaults, and one clear
``ConfigError`` (server, setting, what it must be) for each value that cannot be used."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.auth.settings import CallbackSettings, OAuthSettings
from mcpfleet.errors import ConfigError

SNAKE = {
    "grant_type": "client_credentials",
    "scope": "read write",
    "client_id": "cli",
    "client_secret": "s3cret",
    "token_endpoint_auth_method": "client_secret_post",
    "issuer": "https://auth.example.com",
    "private_key_file": "~/keys/client.pem",
    "signing_algorithm": "ES256",
}
CAMEL = {
    "grantType": "client_credentials",
    "scopes": ["read", "write"],
    "clientId": "cli",
    "clientSecret": "s3cret",
    "tokenEndpointAuthMethod": "client_secret_post",
    "issuer": "https://auth.example.com",
    "privateKeyFile": "~/keys/client.pem",
    "signingAlgorithm": "ES256",
}


def test_snake_and_camel_spellings_read_the_same() -> None:
    snake = OAuthSettings.parse("remote", SNAKE)
    assert snake == OAuthSettings.parse("remote", CAMEL)
    assert snake.grant_type == "client_credentials"
    assert snake.scope == "read write"
    assert snake.client_id == "cli" and snake.client_secret == "s3cret"
    assert snake.token_endpoint_auth_method == "client_secret_post"
    assert snake.private_key_file == Path.home() / "keys" / "client.pem"
    assert snake.signing_algorithm == "ES256"


def test_no_block_means_the_authorization_code_defaults() -> None:
    settings = OAuthSettings.parse("remote", None)
    assert settings == OAuthSettings.parse("remote", {"client_id": "", "scope": None})
    assert settings.grant_type == "authorization_code"
    assert settings.client_id is None and settings.scope is None
    assert settings.callback == CallbackSettings(port=0, path="/callback", host="127.0.0.1")
    assert settings.signing_algorithm == "RS256"


def test_settings_are_frozen() -> None:
    settings = OAuthSettings.parse("remote", {"client_id": "cli"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.client_id = "other"  # type: ignore[misc]


def test_a_numeric_client_id_is_text() -> None:
    assert OAuthSettings.parse("remote", {"clientId": 12345}).client_id == "12345"


@pytest.mark.parametrize(
    ("oauth", "callback"),
    [
        ({"callback_port": 8765}, CallbackSettings(port=8765)),
        ({"callbackPort": "8765"}, CallbackSettings(port=8765)),
        (
            {"redirect_uri": "http://localhost:9000/cb"},
            CallbackSettings(port=9000, path="/cb", host="localhost", from_redirect_uri=True),
        ),
        (
            {"redirectUri": "http://[::1]:9000"},
            CallbackSettings(port=9000, path="/callback", host="[::1]", from_redirect_uri=True),
        ),
    ],
)
def test_the_login_callback_comes_from_a_port_or_a_redirect_uri(
    oauth: dict[str, Any], callback: CallbackSettings
) -> None:
    assert OAuthSettings.parse("remote", oauth).callback == callback


def test_an_explicit_callback_port_wins_over_the_configured_one_but_not_over_a_redirect_uri() -> None:
    configured = OAuthSettings.parse("remote", {"callback_port": 8765})
    assert configured.with_callback_port(9999).callback.port == 9999
    assert configured.with_callback_port(None).callback.port == 8765
    redirect = OAuthSettings.parse("remote", {"redirect_uri": "http://127.0.0.1:9000/cb"})
    assert redirect.with_callback_port(9999).callback.port == 9000


BAD_VALUES = [
    ({"grant_type": "password"}, "oauth.grant_type must be one of authorization_code"),
    ({"grantType": "implicit"}, "oauth.grant_type must be one of"),
    ({"token_endpoint_auth_method": "magic"}, "oauth.token_endpoint_auth_method must be one of"),
    ({"client_metadata_url": "http://app.example.com/client.json"}, "oauth.client_metadata_url must be"),
    ({"clientMetadataUrl": "https://app.example.com/"}, "oauth.client_metadata_url must be"),
    ({"redirect_uri": "https://127.0.0.1:9000/cb"}, "oauth.redirect_uri must be http://127.0.0.1:PORT"),
    ({"redirect_uri": "http://example.com:9000/cb"}, "oauth.redirect_uri must be"),
    ({"redirect_uri": "http://127.0.0.1/cb"}, "oauth.redirect_uri must be"),
    ({"redirect_uri": "http://127.0.0.1:99999/cb"}, "oauth.redirect_uri must be"),
    ({"callback_port": "eighty"}, "oauth.callback_port must be a port number, not 'eighty'"),
    ({"callback_port": 70000}, "oauth.callback_port must be a port number, not 70000"),
    ({"callback_port": -1}, "oauth.callback_port must be a port number"),
    ({"callback_port": True}, "oauth.callback_port must be a port number"),
    ({"client_id": {"nested": "object"}}, "oauth.client_id must be text, not dict"),
    ({"clientSecret": ["a", "b"]}, "oauth.client_secret must be text, not list"),
    ({"grant_type": "client_credentials"}, "oauth.grant_type client_credentials needs oauth.client_id"),
    (
        {"grant_type": "client_credentials", "client_id": "c"},
        "needs oauth.client_secret or oauth.private_key_file",
    ),
    (
        {"grant_type": "identity_assertion", "client_id": "c", "client_secret": "s"},
        "oauth.grant_type identity_assertion needs oauth.issuer",
    ),
    (
        {
            "grant_type": "identity_assertion",
            "issuer": "https://auth.example.com",
            "idp_token_endpoint": "https://idp.example.com/token",
            "idp_client_id": "idp",
            "client_id": "c",
            "client_secret": "s",
        },
        "oauth.grant_type identity_assertion needs oauth.id_token_file",
    ),
]


@pytest.mark.parametrize(("oauth", "message"), BAD_VALUES)
def test_an_unusable_value_is_a_config_error_naming_the_server_and_the_setting(
    oauth: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        OAuthSettings.parse("remote", oauth)
    assert str(raised.value).startswith('MCP server "remote": oauth.')
    assert message in str(raised.value)
    assert raised.value.server == "remote"
    assert "\n" not in str(raised.value)


def test_callback_settings_only_matter_to_the_authorization_code_grant() -> None:
    settings = OAuthSettings.parse(
        "remote",
        {"grant_type": "client_credentials", "client_id": "c", "client_secret": "s", "callback_port": "x"},
    )
    assert settings.callback == CallbackSettings()
