"""The ``oauth`` block of a server's config, read once into a validated ``OAuthSettings``.

Every setting may be spelled in snake_case or camelCase (``client_id`` / ``clientId``), as the
editors' files do; an empty value counts as absent. Whatever cannot be used is a
``ConfigError`` naming the server, the setting and what it must be, raised when the settings
are read, before anything is contacted. Imports nothing of the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import ConfigError

GrantType = Literal["authorization_code", "client_credentials", "identity_assertion"]
GRANT_TYPES: tuple[GrantType, ...] = ("authorization_code", "client_credentials", "identity_assertion")
TokenEndpointAuthMethod = Literal["client_secret_basic", "client_secret_post", "none"]
SECRET_AUTH_METHODS: tuple[TokenEndpointAuthMethod, ...] = ("client_secret_basic", "client_secret_post")
"""How a client with a secret authenticates at the token endpoint, in order of preference."""
TOKEN_ENDPOINT_AUTH_METHODS: tuple[TokenEndpointAuthMethod, ...] = (*SECRET_AUTH_METHODS, "none")
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
DEFAULT_CALLBACK_PATH = "/callback"
DEFAULT_JWT_SIGNING_ALGORITHM = "RS256"
MAX_PORT = 65535


@dataclass(frozen=True)
class CallbackSettings:
    """Where the browser comes back after an interactive login: ``http://host:port/path``."""

    port: int = 0
    """0: a free port, chosen when the login starts."""
    path: str = DEFAULT_CALLBACK_PATH
    host: str = "127.0.0.1"
    """How the redirect URI names the loopback host (a configured ``localhost`` stays so)."""
    from_redirect_uri: bool = False
    """Set by a configured ``redirect_uri``, which the authorization server knows the client by."""


@dataclass(frozen=True)
class OAuthSettings:
    """The OAuth settings of one HTTP server."""

    server: str
    """The server's name, for error messages."""
    grant_type: GrantType = "authorization_code"
    scope: str | None = None
    """Space-separated scopes (a configured list is joined)."""
    client_id: str | None = None
    client_secret: str | None = None
    token_endpoint_auth_method: TokenEndpointAuthMethod | None = None
    client_metadata_url: str | None = None
    """An https URL with a path, used as the client ID (a client ID metadata document)."""
    callback: CallbackSettings = field(default_factory=CallbackSettings)
    """From ``redirect_uri`` or ``callback_port`` (authorization code grant only)."""
    issuer: str | None = None
    private_key_file: Path | None = None
    """A ``private_key_jwt`` signing key, for the client credentials grant."""
    signing_algorithm: str = DEFAULT_JWT_SIGNING_ALGORITHM
    idp_token_endpoint: str | None = None
    idp_client_id: str | None = None
    idp_client_secret: str | None = None
    id_token_file: Path | None = None

    @classmethod
    def parse(cls, server: str, raw: Mapping[str, Any] | None) -> OAuthSettings:
        """Read and check a server's ``oauth`` block (``None``: no block, all defaults)."""
        reader = _Reader(server, raw or {})
        grant_type = reader.choice(GRANT_TYPES, "grant_type", "grantType") or "authorization_code"
        settings = cls(
            server=server,
            grant_type=cast("GrantType", grant_type),
            scope=reader.scope(),
            client_id=reader.text("client_id", "clientId"),
            client_secret=reader.text("client_secret", "clientSecret"),
            token_endpoint_auth_method=cast(
                "TokenEndpointAuthMethod | None",
                reader.choice(
                    TOKEN_ENDPOINT_AUTH_METHODS, "token_endpoint_auth_method", "tokenEndpointAuthMethod"
                ),
            ),
            client_metadata_url=reader.client_metadata_url(),
            callback=reader.callback() if grant_type == "authorization_code" else CallbackSettings(),
            issuer=reader.text("issuer"),
            private_key_file=reader.path("private_key_file", "privateKeyFile"),
            signing_algorithm=reader.text("signing_algorithm", "signingAlgorithm")
            or DEFAULT_JWT_SIGNING_ALGORITHM,
            idp_token_endpoint=reader.text("idp_token_endpoint", "idpTokenEndpoint"),
            idp_client_id=reader.text("idp_client_id", "idpClientId"),
            idp_client_secret=reader.text("idp_client_secret", "idpClientSecret"),
            id_token_file=reader.path("id_token_file", "idTokenFile"),
        )
        settings._check_grant()
        return settings

    def with_callback_port(self, port: int | None) -> OAuthSettings:
        """These settings with the callback on ``port`` (``None``: unchanged), unless a
        ``redirect_uri`` is configured: the authorization server knows the client by it."""
        if port is None or self.callback.from_redirect_uri:
            return self
        return replace(self, callback=CallbackSettings(port=_port(self.server, "callback_port", port)))

    def required(self, setting: str) -> str:
        """The value of a setting the grant cannot do without (checked by ``parse``)."""
        value = getattr(self, setting)
        if value is None:
            raise ConfigError(
                f'MCP server "{self.server}": oauth.grant_type {self.grant_type} needs oauth.{setting}',
                server=self.server,
            )
        return str(value)

    def _check_grant(self) -> None:
        if self.grant_type == "client_credentials":
            self.required("client_id")
            if self.private_key_file is None and self.client_secret is None:
                raise ConfigError(
                    f'MCP server "{self.server}": oauth.grant_type client_credentials needs '
                    "oauth.client_secret or oauth.private_key_file",
                    server=self.server,
                )
        elif self.grant_type == "identity_assertion":
            for setting in (
                "issuer",
                "idp_token_endpoint",
                "idp_client_id",
                "id_token_file",
                "client_id",
                "client_secret",
            ):
                self.required(setting)


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


class _Reader:
    """Looks settings up under each of their spellings and checks their values."""

    def __init__(self, server: str, raw: Mapping[str, Any]) -> None:
        self.server = server
        self.raw = raw

    def value(self, *names: str) -> Any:
        for name in names:
            if self.raw.get(name) not in (None, ""):
                return self.raw[name]
        return None

    def error(self, setting: str, problem: str) -> ConfigError:
        return ConfigError(f'MCP server "{self.server}": oauth.{setting} {problem}', server=self.server)

    def text(self, *names: str) -> str | None:
        value = self.value(*names)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        raise self.error(names[0], f"must be text, not {type(value).__name__} {value!r}")

    def choice(self, allowed: tuple[str, ...], *names: str) -> str | None:
        value = self.value(*names)
        if value is None:
            return None
        if value not in allowed:
            raise self.error(names[0], f"must be one of {', '.join(allowed)}, not {value!r}")
        return str(value)

    def scope(self) -> str | None:
        value = self.value("scope", "scopes")
        if value is None:
            return None
        if isinstance(value, list | tuple):
            return " ".join(str(item) for item in value)
        return str(value)

    def path(self, *names: str) -> Path | None:
        value = self.text(*names)
        return Path(value).expanduser() if value is not None else None

    def client_metadata_url(self) -> str | None:
        url = self.text("client_metadata_url", "clientMetadataUrl")
        if url is None:
            return None
        try:
            parts = urlsplit(url)
        except ValueError:
            parts = None
        if parts is None or parts.scheme != "https" or parts.path in ("", "/"):
            raise self.error("client_metadata_url", f"must be an https URL with a path, not {url}")
        return url

    def callback(self) -> CallbackSettings:
        redirect_uri = self.text("redirect_uri", "redirectUri")
        if redirect_uri is not None:
            try:
                parts = urlsplit(redirect_uri)
                port = parts.port
            except ValueError:
                parts, port = None, None
            if (
                parts is None
                or parts.scheme != "http"
                or parts.hostname not in LOOPBACK_HOSTS
                or port is None
            ):
                raise self.error(
                    "redirect_uri",
                    "must be http://127.0.0.1:PORT/PATH (a loopback address with a port), "
                    f"not {redirect_uri}",
                )
            return CallbackSettings(
                port=port,
                path=parts.path or DEFAULT_CALLBACK_PATH,
                host=parts.netloc.rsplit(":", 1)[0],
                from_redirect_uri=True,
            )
        port_value = self.value("callback_port", "callbackPort")
        if port_value is None:
            return CallbackSettings()
        return CallbackSettings(port=_port(self.server, "callback_port", port_value))


def _port(server: str, setting: str, value: Any) -> int:
    port = -1
    if isinstance(value, int) and not isinstance(value, bool):
        port = value
    elif isinstance(value, str) and value.strip().isdigit():
        port = int(value)
    if not 0 <= port <= MAX_PORT:
        raise ConfigError(
            f'MCP server "{server}": oauth.{setting} must be a port number, not {value!r}', server=server
        )
    return port


__all__ = [
    "DEFAULT_CALLBACK_PATH",
    "SECRET_AUTH_METHODS",
    "CallbackSettings",
    "GrantType",
    "OAuthSettings",
    "TokenEndpointAuthMethod",
    "server_url_of",
]
