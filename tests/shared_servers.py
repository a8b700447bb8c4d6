"""One server of a kind per test run, shared by every pytest-xdist worker (the PostgreSQL and
Redis fixtures, ``tests/postgres.py`` and ``tests/redis.py``).

The first worker to ask starts it and writes its address to ``server.json`` in the run's folder
for that kind; the others read it there, under a file lock; the process that ran the whole
session stops it (``tests/conftest.py``'s ``pytest_sessionfinish``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol, TypeVar


class RunServer(Protocol):
    """A server a test run starts: a dataclass of its address, which can stop it."""

    def stop(self) -> None: ...


_Server = TypeVar("_Server", bound=RunServer)


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def shared_server(folder: Path, start: Callable[[], _Server], kind: Callable[..., _Server]) -> _Server:
    """The run's server kept in ``folder``: started by the first caller (of any worker) with
    ``start``, read back by the others as ``kind(**fields)``."""
    folder.mkdir(parents=True, exist_ok=True)
    address = folder / "server.json"
    with _locked(folder / "server.lock"):
        if address.exists():
            return kind(**json.loads(address.read_text()))
        server = start()
        fields: dict[str, Any] = asdict(server)  # type: ignore[call-overload]
        address.write_text(json.dumps(fields))
        return server


def stop_shared_server(folder: Path, kind: Callable[..., RunServer]) -> None:
    """Stop the run's server kept in ``folder``, if a worker started one (once, at the run's end)."""
    address = folder / "server.json"
    if not address.exists():
        return
    with _locked(folder / "server.lock"):
        if address.exists():
            kind(**json.loads(address.read_text())).stop()
            address.unlink()
