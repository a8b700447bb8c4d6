"""Bounded hostile HTTP clients for the gateway's listener tests: slow-loris and connection flood.

Both run in a thread of the test process over real loopback sockets, hold at most the sockets
they were told to, and stop by themselves at a bound, so a gateway that never answers them
fails the test instead of hanging it. ``SocketFate`` records what the gateway did to each
socket: its first answer's status line (``408``, ``503``) and whether it closed the socket.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class SocketFate:
    """What became of one hostile socket: the status the gateway answered, when it closed it."""

    status: int | None = None
    closed_after_s: float | None = None
    refused: bool = False
    """The connection itself failed (the listen queue full, a reset before it was set up)."""


@dataclass
class HostileClient:
    """Sockets opened against ``port`` from ``source`` (a loopback address), watched in a thread."""

    port: int
    sockets: int
    source: str = "127.0.0.1"
    bound_s: float = 120.0
    trickle_every_s: float | None = None
    """Slow-loris: one more header byte on every socket this often, never the end of the headers."""
    fates: list[SocketFate] = field(default_factory=list)
    opened: threading.Event = field(default_factory=threading.Event)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> HostileClient:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self.opened.wait(self.bound_s):
            raise AssertionError(f"could not even open {self.sockets} sockets to port {self.port}")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(self.bound_s)

    def wait_until_all_closed(self) -> bool:
        """Whether the gateway closed every socket before the bound (the thread stops then)."""
        assert self._thread is not None
        self._thread.join(self.bound_s + 10)
        return all(fate.refused or fate.closed_after_s is not None for fate in self.fates)

    @property
    def held_open(self) -> int:
        return sum(1 for fate in self.fates if not fate.refused and fate.closed_after_s is None)

    def statuses(self) -> list[int | None]:
        return [fate.status for fate in self.fates if not fate.refused]

    def _run(self) -> None:
        started = time.monotonic()
        selector = selectors.DefaultSelector()
        request_start = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: application/json\r\n"
        ).encode()
        answers: dict[socket.socket, bytes] = {}
        for _ in range(self.sockets):
            fate = SocketFate()
            self.fates.append(fate)
            client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                client.bind((self.source, 0))
                client.settimeout(10)
                client.connect(("127.0.0.1", self.port))
                if self.trickle_every_s is not None:
                    client.sendall(request_start)
                client.setblocking(False)
            except OSError:
                fate.refused = True
                client.close()
                continue
            answers[client] = b""
            selector.register(client, selectors.EVENT_READ, fate)
        self.opened.set()
        next_trickle = time.monotonic()
        try:
            while selector.get_map() and not self._stop.is_set():
                now = time.monotonic()
                if now - started > self.bound_s:
                    return
                if self.trickle_every_s is not None and now >= next_trickle:
                    next_trickle = now + self.trickle_every_s
                    for key in list(selector.get_map().values()):
                        with contextlib.suppress(OSError):
                            key.fileobj.send(b"X")  # type: ignore[union-attr]
                for key, _ in selector.select(timeout=0.2):
                    ready = key.fileobj
                    assert isinstance(ready, socket.socket)
                    client = ready
                    fate = key.data
                    try:
                        chunk = client.recv(65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        chunk = b""
                    answers[client] += chunk
                    if fate.status is None and b"\r\n" in answers[client]:
                        status_line = answers[client].split(b"\r\n", 1)[0].split()
                        if len(status_line) >= 2 and status_line[1].isdigit():
                            fate.status = int(status_line[1])
                    if not chunk:
                        fate.closed_after_s = time.monotonic() - started
                        selector.unregister(client)
                        client.close()
        finally:
            for key in list(selector.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            selector.close()
