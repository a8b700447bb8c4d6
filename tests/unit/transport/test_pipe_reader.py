"""The stdout pipe reader on a real pipe: every byte comes out once and in order, a reply
to a waiting reader costs no re-registration with the event loop, and what nobody waits
for stays in the pipe.

The event loop's ``add_reader`` and ``remove_reader`` are spied on (they still do their
work) to count how often the pipe is registered, which is the cost this reader exists to
avoid: two system calls per message when every wait registered the pipe afresh.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest

from mcpfleet.transport.pipe import PipeReader

pytestmark = pytest.mark.anyio

READ_BYTES = 64 * 1024


class Registrations:
    """How often the running loop was asked to watch and to stop watching a descriptor."""

    def __init__(self) -> None:
        self.added = 0
        self.removed = 0


class Pipe:
    """A real pipe: the read end non-blocking, as ``ServerProcess`` leaves a server's stdout."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self._open = {self.read_fd, self.write_fd}

    def close_writer(self) -> None:
        self._open.discard(self.write_fd)
        os.close(self.write_fd)

    def close(self) -> None:
        for fd in self._open:
            os.close(fd)


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    opened = Pipe()
    yield opened
    opened.close()


@pytest.fixture
async def registrations(monkeypatch: pytest.MonkeyPatch) -> Registrations:
    loop = asyncio.get_running_loop()
    counts = Registrations()
    add_reader, remove_reader = loop.add_reader, loop.remove_reader

    def counted_add(fd: int, callback: Callable[..., Any], *args: Any) -> None:
        counts.added += 1
        add_reader(fd, callback, *args)

    def counted_remove(fd: int) -> bool:
        counts.removed += 1
        return remove_reader(fd)

    monkeypatch.setattr(loop, "add_reader", counted_add)
    monkeypatch.setattr(loop, "remove_reader", counted_remove)
    return counts


async def test_replies_to_a_waiting_reader_keep_the_pipe_registered(
    pipe: Pipe, registrations: Registrations
) -> None:
    read_fd, write_fd = pipe.read_fd, pipe.write_fd
    reader = PipeReader(read_fd, read_bytes=READ_BYTES, owner="test")
    async with anyio.create_task_group() as task_group:
        for index in range(50):
            message = f"reply {index}\n".encode()
            # The reply comes once the reader waits, as a server's answer to a request does.
            task_group.start_soon(_write_soon, write_fd, message)
            assert await reader.read() == message
    reader.close()
    assert (registrations.added, registrations.removed) == (1, 1)


async def test_what_arrives_while_nobody_waits_stays_in_the_pipe_until_the_next_read(
    pipe: Pipe, registrations: Registrations
) -> None:
    read_fd, write_fd = pipe.read_fd, pipe.write_fd
    reader = PipeReader(read_fd, read_bytes=READ_BYTES, owner="test")
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(_write_soon, write_fd, b"first\n")
        assert await reader.read() == b"first\n"
    # Nobody waits now: the loop reads at most one more chunk, then stops watching.
    for index in range(20):
        os.write(write_fd, f"line {index}\n".encode())
        await anyio.sleep(0.005)
    assert registrations.removed == 1
    received = b""
    while len(received) < sum(len(f"line {index}\n") for index in range(20)):
        received += await reader.read()
    assert received == b"".join(f"line {index}\n".encode() for index in range(20))
    reader.close()


async def test_a_read_cancelled_after_taking_a_chunk_leaves_it_for_the_next_read(
    pipe: Pipe,
) -> None:
    read_fd, write_fd = pipe.read_fd, pipe.write_fd
    reader = PipeReader(read_fd, read_bytes=READ_BYTES, owner="test")
    reader.pause()
    os.write(write_fd, b"held notification\n")
    # The deadline of a timed read has already passed when the pipe turns out to hold data.
    with anyio.move_on_after(-1):
        await reader.read()
    with anyio.fail_after(5):
        assert await reader.read() == b"held notification\n"
    reader.close()


async def test_the_end_of_the_pipe_comes_after_everything_written_before_it(pipe: Pipe) -> None:
    reader = PipeReader(pipe.read_fd, read_bytes=READ_BYTES, owner="test")
    payload = os.urandom(3 * READ_BYTES + 17)
    async with anyio.create_task_group() as task_group:
        task_group.start_soon(_write_all_then_close, pipe, payload)
        received = b""
        with anyio.fail_after(10):
            while True:
                try:
                    received += await reader.read()
                except anyio.EndOfStream:
                    break
    assert received == payload
    with pytest.raises(anyio.EndOfStream):
        await reader.read()
    reader.close()


async def test_closing_stops_the_loop_watching_the_pipe(pipe: Pipe, registrations: Registrations) -> None:
    reader = PipeReader(pipe.read_fd, read_bytes=READ_BYTES, owner="test")
    with anyio.move_on_after(0.05):
        await reader.read()
    reader.close()
    assert (registrations.added, registrations.removed) == (1, 1)
    # Nothing is registered any more: the descriptor may now be closed and its number reused.
    assert asyncio.get_running_loop().remove_reader(pipe.read_fd) is False


async def _write_soon(fd: int, data: bytes) -> None:
    await anyio.sleep(0.001)
    os.write(fd, data)


async def _write_all_then_close(pipe: Pipe, data: bytes) -> None:
    view = memoryview(data)
    while view:
        await anyio.wait_writable(pipe.write_fd)
        written = os.write(pipe.write_fd, view[:4096])
        view = view[written:]
    pipe.close_writer()
