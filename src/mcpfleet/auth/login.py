"""``mcpfleet login NAME`` and ``logout NAME``: the interactive flow, proved by one connection.

A login drops the server's previous tokens, runs the SDK's whole authorization flow with the
loopback callback listening before the URL is handed out, and connects once with the new
tokens (the 401 on the way is what starts the flow). The connection check is the client's
``connect_to_server``: ``auth`` imports ``client``, never the other way round.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2

from mcpfleet.auth.loopback import LoopbackCallback
from mcpfleet.auth.provider import DEFAULT_LOGIN_TIMEOUT_S, AuthorizeUrlHandler, build_provider
from mcpfleet.auth.settings import OAuthSettings, server_url_of
from mcpfleet.auth.storage import FileTokenStorage
from mcpfleet.client.opening import connect_to_server
from mcpfleet.config.model import ServerConfig
from mcpfleet.errors import AuthRequiredError, ConnectError, LoginError


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
    out, ``ConfigError`` when the server is not an HTTP server or its settings are unusable.
    """
    url = server_url_of(name, config)
    settings = OAuthSettings.parse(name, config.oauth)
    callback = LoopbackCallback.from_settings(name, settings.callback)
    try:
        callback.bind()
        provider = build_provider(
            url,
            settings,
            interactive=True,
            on_authorize_url=on_authorize_url,
            callback=callback,
            callback_timeout_s=timeout_s,
        )
        await FileTokenStorage(url).forget_tokens()
        handshake_s = config.effective_timeout_ms / 1000 if config.effective_timeout_ms else None
        with anyio.fail_after(timeout_s + handshake_s if handshake_s is not None else None):
            await _initialize_once(name, config, provider, cwd if cwd is not None else Path.cwd())
    except TimeoutError as error:
        raise LoginError(
            f'Login to MCP server "{name}" did not finish within {timeout_s:g}s; run the login again',
            server=name,
        ) from error
    finally:
        callback.close()


async def _initialize_once(name: str, config: ServerConfig, auth: httpx2.Auth, cwd: Path) -> None:
    """Connect (``initialize``) with ``auth`` and close: the 401 on the way is what starts the flow."""
    from mcp.client.auth import OAuthFlowError

    try:
        # The handshake waits for a person here; ``login`` bounds the whole of it instead.
        async with connect_to_server(name, config, cwd=cwd, timeout_ms=0, auth=auth):
            pass
    except ConnectError as error:
        if isinstance(error, LoginError | AuthRequiredError):
            raise
        oauth_error = _find_in_chain(error, OAuthFlowError)
        if oauth_error is None:
            raise
        raise LoginError(f'Login to MCP server "{name}" failed: {oauth_error}', server=name) from error


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


__all__ = ["login", "logout"]
