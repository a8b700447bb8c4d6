"""The transport under one connection, and what its end says about why the connection ended.

A stdio server is spawned before the SDK is imported (``opening.py``) and handed over here
running; an HTTP one is built here when the owner task connects, its headers' secrets resolved
off the loop. Whichever it is, the link answers what the rest of the connection asks of it:
the process (its pid, spawn time, stderr), the HTTP status of a refused request, and, once
the session ended, a reason a person can read.

Part of ``connection.py``, which imports the SDK; the HTTP transport is imported when built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import anyio

from mcpfleet.client._errors import first_line
from mcpfleet.client.secrets import resolve_secrets_off_loop
from mcpfleet.errors import ConnectError
from mcpfleet.transport.process import exit_description

if TYPE_CHECKING:
    from mcpfleet.client.options import ConnectionOptions
    from mcpfleet.config.model import ServerConfig
    from mcpfleet.transport.http import HttpTransport
    from mcpfleet.transport.process import ServerProcess
    from mcpfleet.transport.stdio import StdioTransport

EXIT_OBSERVE_S = 1.0
"""After the session ends, how long to wait for the process exit status to name the reason."""


class TransportLink:
    """One connection's transport: the stdio one it was handed, or the HTTP one it builds."""

    def __init__(
        self, name: str, config: ServerConfig, options: ConnectionOptions, stdio: StdioTransport | None
    ) -> None:
        if config.transport == "stdio" and stdio is None:
            raise ValueError(f"{name}: a stdio connection takes over a spawned transport (see opening.py)")
        self._name = name
        self._config = config
        self._auth = options.auth
        self._resolve_secrets = options.resolve_secrets
        self._stdio = stdio
        self.http: HttpTransport | None = None
        """The HTTP transport, once built."""

    @property
    def process(self) -> ServerProcess | None:
        return self._stdio.process if self._stdio is not None else None

    @property
    def http_status(self) -> int | None:
        """The HTTP status of the last request the server refused, if any."""
        return self.http.error_status if self.http is not None else None

    def stderr_tail(self, lines: int) -> list[str]:
        return self.process.stderr.tail(lines) if self.process is not None else []

    async def build(self) -> StdioTransport | HttpTransport:
        if self._stdio is not None:
            return self._stdio
        from mcpfleet.transport.http import HttpTransport

        config = self._config
        if not config.url:
            raise ConnectError(f'MCP server "{self._name}" has no "url"', server=self._name)
        headers = await resolve_secrets_off_loop(
            self._name, config.headers, enabled=self._resolve_secrets, literal_keys=config.literal_header_keys
        )
        kind: Literal["http", "sse"] = "sse" if config.transport == "sse" else "http"
        self.http = HttpTransport(config.url, kind=kind, headers=headers, auth=self._auth)  # type: ignore[arg-type]
        return self.http

    async def loss_reason(self, stream_error: BaseException | None) -> str:
        """Why the session ended on its own: the process's exit, or the HTTP stream's failure."""
        process = self.process
        if process is not None:
            with anyio.move_on_after(EXIT_OBSERVE_S):
                await process.exited.wait()
            if process.returncode is not None:
                return f"process {exit_description(process.returncode)}"
            return "the server closed its stdout"
        if stream_error is not None:
            return f"the HTTP stream failed: {first_line(stream_error)}"
        return "the server ended the session"


__all__ = ["TransportLink"]
