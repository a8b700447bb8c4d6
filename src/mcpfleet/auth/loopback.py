"""The redirect target of an interactive login: a one-shot HTTP listener on the loopback address.

It serves only the callback path, answers each request in one small page, and hands back the
authorization code (or the authorization server's refusal as a ``LoginError``). A slow or
stray client cannot hold it: each request line must arrive within a bound and a size limit.
"""

from __future__ import annotations

import socket
from contextlib import suppress
from urllib.parse import parse_qs, urlsplit

import anyio
from anyio.abc import SocketListener, SocketStream
from mcp.shared.auth import AuthorizationCodeResult

from mcpfleet.auth.settings import DEFAULT_CALLBACK_PATH, CallbackSettings
from mcpfleet.errors import LoginError

CALLBACK_REQUEST_TIMEOUT_S = 10.0
"""How long one connection to the loopback callback may take to send its request line."""
MAX_CALLBACK_REQUEST_BYTES = 64 * 1024


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

    @classmethod
    def from_settings(cls, server_name: str, settings: CallbackSettings) -> LoopbackCallback:
        return cls(server_name, port=settings.port, path=settings.path, host=settings.host)

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


__all__ = ["LoopbackCallback"]
