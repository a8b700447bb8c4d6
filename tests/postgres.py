"""A throwaway PostgreSQL server on loopback, from the distribution's package (``make postgresql``).

The team state's tests run against a real server; starting one costs a couple of seconds
(``initdb``, then the postmaster), so a test run starts at most one and every pytest-xdist worker
shares it: the first worker that needs it starts it under a lock file in the run's shared
temporary folder and leaves its address there (``server.json``); the others read it; the process
that ran the session (the controller under xdist) stops it at the end (``stop_shared_server``,
from ``tests/conftest.py``'s ``pytest_sessionfinish``). Each test gets a database of its own.

``initdb`` refuses to run as root: as root the server's files belong to the ``postgres`` user the
package creates and every program of the server runs as that user (``runuser``), in a folder under
the system's temporary folder (pytest's own is private to root). The server listens on 127.0.0.1
only, on a free port, with no Unix socket, and asks for the superuser's password (SCRAM): the
tests' DSNs carry a real password, which no error message may show. Standard library only, so the
bench can start one too (``bench/team_state.py``).
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests import shared_servers

SERVER_USER = "postgres"
SUPERUSER = "postgres"
START_ATTEMPTS = 3
"""Ports are picked free and then bound by the server: another process may take one meanwhile."""
PG_CTL_WAIT_S = 60
"""How long ``pg_ctl start`` waits for the server to accept connections (a loaded machine)."""
SHARED_FOLDER_NAME = "postgres"
INSTALL_HINT = "PostgreSQL's server is not installed: run `make postgresql` as root (Debian's package)"


class PostgresUnavailable(RuntimeError):
    """No server could be started here; the message says why and what to do."""


@dataclass(frozen=True)
class PostgresServer:
    """A running server: where it listens and how to reach it as the superuser."""

    root: str
    """The folder of its data, its log and its password file; removed by ``stop``."""
    bin_dir: str
    port: int
    password: str

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{database}"

    @property
    def data_dir(self) -> Path:
        return Path(self.root) / "data"

    def stop(self) -> None:
        """Stop it now (``immediate``: nothing of a test's data is worth a clean shutdown)."""
        _run_as_server_user(
            [str(Path(self.bin_dir) / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate", "-w", "stop"],
            cwd=self.root,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def server_bin_dir() -> Path | None:
    """The newest installed server's programs (Debian keeps each major version apart)."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda path: int(path.parent.parent.name) if path.parent.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb is not None else None


def start_postgres(*, durable: bool = False) -> PostgresServer:
    """A new server in a folder of its own; ``durable`` keeps ``fsync`` on (the bench measures
    what a real deployment pays; the tests do not need their data to survive a power cut)."""
    bin_dir = server_bin_dir()
    if bin_dir is None:
        raise PostgresUnavailable(INSTALL_HINT)
    root = Path(tempfile.mkdtemp(prefix="mcpfleet-postgres-"))
    try:
        password = secrets.token_urlsafe(18)
        _give_to_server_user(root)
        password_file = root / "password"
        password_file.write_text(password + "\n")
        _give_to_server_user(password_file)
        _run_as_server_user(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(root / "data"),
                "-U",
                SUPERUSER,
                "--pwfile",
                str(password_file),
                "--auth",
                "scram-sha-256",
                "-E",
                "UTF8",
                "--locale",
                "C",
                "--no-sync",
                "--no-instructions",
            ],
            cwd=str(root),
        )
        password_file.unlink()
        for _ in range(START_ATTEMPTS):
            server = PostgresServer(
                root=str(root), bin_dir=str(bin_dir), port=_free_port(), password=password
            )
            if _start(server, durable=durable):
                return server
        log = (root / "log").read_text(errors="replace")[-2000:] if (root / "log").exists() else ""
        raise PostgresUnavailable(f"PostgreSQL did not start in {root}; its log ends:\n{log}")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _start(server: PostgresServer, *, durable: bool) -> bool:
    settings = {
        "listen_addresses": "'127.0.0.1'",
        "port": str(server.port),
        "unix_socket_directories": "''",
        "max_connections": "200",
        "shared_buffers": "32MB",
        "fsync": "on" if durable else "off",
        "full_page_writes": "on" if durable else "off",
    }
    config = server.data_dir / "postgresql.auto.conf"
    config.write_text("".join(f"{name} = {value}\n" for name, value in settings.items()))
    _give_to_server_user(config)
    started = _run_as_server_user(
        [
            str(Path(server.bin_dir) / "pg_ctl"),
            "-D",
            str(server.data_dir),
            "-l",
            str(Path(server.root) / "log"),
            "-w",
            "-t",
            str(PG_CTL_WAIT_S),
            "start",
        ],
        cwd=server.root,
        check=False,
    )
    return started.returncode == 0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _give_to_server_user(path: Path) -> None:
    if os.geteuid() == 0:
        account = pwd.getpwnam(SERVER_USER)
        os.chown(path, account.pw_uid, account.pw_gid)


def _run_as_server_user(
    command: list[str], *, cwd: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SERVER_USER)
        except KeyError:
            raise PostgresUnavailable(f"no {SERVER_USER!r} user: {INSTALL_HINT}") from None
        # util-linux's runuser, in sbin, which a CI job's PATH may leave out.
        runuser = shutil.which("runuser", path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin") or "runuser"
        command = [runuser, "-u", SERVER_USER, "--", *command]
    completed = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if check and completed.returncode != 0:
        raise PostgresUnavailable(f"{' '.join(command)} failed ({completed.returncode}): {completed.stderr}")
    return completed


def shared_server(shared_root: Path) -> PostgresServer:
    """The run's server: started by the first caller (of any worker), read by the others."""
    return shared_servers.shared_server(shared_root / SHARED_FOLDER_NAME, start_postgres, PostgresServer)


def stop_shared_server(shared_root: Path) -> None:
    """Stop the run's server if a worker started one (called once, when the whole run ends)."""
    shared_servers.stop_shared_server(shared_root / SHARED_FOLDER_NAME, PostgresServer)


def database_name(test_name: str) -> str:
    """A database name of this test's own: its name, made safe, and a random suffix."""
    base = re.sub(r"[^a-z0-9_]+", "_", test_name.lower()).strip("_")[:40] or "test"
    return f"t_{base}_{secrets.token_hex(4)}"
