"""What every stream wrapper handed to the SDK shares: ``async with`` closes it, and a read
stream iterates until its end. The wrappers themselves (``probe.py``, ``watched.py``) only
say how they receive, send and close."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Self

import anyio

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage


class ClosingStream:
    """Leaving ``async with`` closes the stream."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


class ReceivingStream(ClosingStream):
    """A read stream: ``async for message in stream`` until the other side ends it."""

    async def receive(self) -> SessionMessage | Exception:
        raise NotImplementedError

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None
