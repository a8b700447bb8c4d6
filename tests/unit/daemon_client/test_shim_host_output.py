"""The shim's writer of the host's stdout (``_HostOutput``): the daemon's bytes are copied as
they come, and a line the shim makes itself never lands inside a line of the daemon's."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from mcpfleet.daemon_client.shim import _HostOutput


class _Pipe:
    """A pipe standing in for the host's stdout: the output writes one end, the test reads the other."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        os.set_blocking(self.read_end, False)

    def written(self) -> bytes:
        """Everything written since the last call."""
        received = bytearray()
        while True:
            try:
                chunk = os.read(self.read_end, 65536)
            except BlockingIOError:
                return bytes(received)
            received += chunk

    def close(self) -> None:
        os.close(self.read_end)
        os.close(self.write_end)


@pytest.fixture
def pipe() -> Iterator[_Pipe]:
    opened = _Pipe()
    yield opened
    opened.close()


def test_a_shim_line_waits_for_the_end_of_the_daemons_line(pipe: _Pipe) -> None:
    output = _HostOutput(pipe.write_end)
    output.copy(b'{"id":1,"res')
    output.send(b'{"shim":1}\n')
    assert pipe.written() == b'{"id":1,"res'
    output.copy(b'ult":{}}\n{"id":2')
    assert pipe.written() == b'ult":{}}\n{"shim":1}\n{"id":2'


def test_after_a_daemon_chunk_that_ends_a_line_shim_lines_go_out_at_once(pipe: _Pipe) -> None:
    output = _HostOutput(pipe.write_end)
    output.copy(b'{"id":1,"res')
    output.send(b'{"shim":1}\n')
    output.copy(b'ult":{}}\n')  # ends exactly at the newline, while a shim line waits
    assert pipe.written() == b'{"id":1,"result":{}}\n{"shim":1}\n'
    output.send(b'{"shim":2}\n')
    assert pipe.written() == b'{"shim":2}\n'


def test_a_cut_line_is_ended_before_the_waiting_shim_lines(pipe: _Pipe) -> None:
    output = _HostOutput(pipe.write_end)
    output.copy(b'{"id":1,"res')
    output.send(b'{"shim":1}\n')
    output.end_cut_line()
    output.send(b'{"shim":2}\n')
    assert pipe.written() == b'{"id":1,"res\n{"shim":1}\n{"shim":2}\n'
