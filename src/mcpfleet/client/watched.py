"""The transport as the SDK's ``Client`` sees it: watched for its end, and read the 2026-07-28 way.

The owner task learns from this wrapper when the server side of the stream ends (a process
exit, a closed HTTP stream), results on a 2026-07-28 connection get their ``resultType``
default (see ``WatchedTransport.speaks_modern``), a request sent on behalf of another
client carries that client's capabilities (``behalf.py``), and the answers to ``tools/list``
are screened (``screening.py``) before the SDK validates them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types
from mcp.shared.message import SessionMessage
from mcp_types import CLIENT_CAPABILITIES_META_KEY

from mcpfleet.client._streams import ClosingStream, ReceivingStream
from mcpfleet.client.behalf import current_caller
from mcpfleet.client.screening import ToolScreen

if TYPE_CHECKING:
    from mcpfleet.client._sdk import ReadStream, TransportStreams, WriteStream


class WatchedTransport(anyio.AsyncContextManagerMixin):
    """Wraps a transport so ``on_end`` is called once the server side of the stream ends."""

    def __init__(self, inner: Any, on_end: Callable[[], None], screen: ToolScreen | None = None) -> None:
        self._inner = inner
        self._on_end = on_end
        self._screen = screen
        self._modern = False
        self._read_stream: EndWatchingReadStream | None = None

    def speaks_modern(self) -> None:
        """From now on, a result without ``resultType`` is given ``"complete"``.

        The 2026-07-28 revision makes the field optional with that default (a client MUST
        read a result without it as complete), while the SDK's wire validation requires it
        and rejects the whole result; filling in the default is what the revision prescribes.
        """
        self._modern = True
        if self._read_stream is not None:
            self._read_stream.default_result_type = True

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[TransportStreams]:
        async with self._inner as (read_stream, write_stream):
            self._read_stream = EndWatchingReadStream(read_stream, self._on_end, self._screen)
            self._read_stream.default_result_type = self._modern
            yield self._read_stream, CallerStampingWriteStream(write_stream, self._screen)


class EndWatchingReadStream(ReceivingStream):
    """A read stream that calls ``on_end`` once the transport delivers its last message."""

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        on_end: Callable[[], None],
        screen: ToolScreen | None = None,
    ) -> None:
        self._inner = inner
        self._on_end = on_end
        self._screen = screen
        self.default_result_type = False

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            message = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise
        if (
            self.default_result_type
            and isinstance(message, SessionMessage)
            and isinstance(message.message, mcp_types.JSONRPCResponse)
        ):
            message.message.result.setdefault("resultType", "complete")
        if self._screen is not None and isinstance(message, SessionMessage):
            self._screen.screen(message.message)
        return message

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await super().__aexit__(exc_type, exc, traceback)
        self._on_end()


class CallerStampingWriteStream(ClosingStream):
    """A write stream that gives a request sent on behalf of another client (``behalf.py``)
    that client's capabilities in place of mcpfleet's.

    The SDK writes a request from the task that sends it, so the sender's caller is known
    here. Only a request that carries 2026-07-28 capabilities is changed.
    """

    def __init__(self, inner: WriteStream[SessionMessage], screen: ToolScreen | None = None) -> None:
        self._inner = inner
        self._screen = screen

    async def send(self, item: SessionMessage) -> None:
        caller = current_caller()
        message = item.message
        if self._screen is not None:
            self._screen.note_request(message)
        if caller is not None and isinstance(message, mcp_types.JSONRPCRequest):
            meta = (message.params or {}).get("_meta")
            if isinstance(meta, dict) and CLIENT_CAPABILITIES_META_KEY in meta:
                meta[CLIENT_CAPABILITIES_META_KEY] = dict(caller.capabilities)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()


__all__ = ["CallerStampingWriteStream", "EndWatchingReadStream", "WatchedTransport"]
