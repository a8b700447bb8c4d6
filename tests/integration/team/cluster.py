"""A team gateway cluster for the tests: real PostgreSQL, a real redis-server of its own, three real
``mcpfleet serve --http --team`` replicas and a real HAProxy in front (round-robin, no stickiness).

``TeamCluster.start(folder, team, postgres_dsn)`` writes the team file (``state: {postgres,
redis}``, ``public_url`` the balancer's URL), adds the service accounts' keys, starts the
replicas on ports of their own (each with ``REPLICA=<i>`` in its environment, which its
backends inherit, plus what ``replica_env`` adds), then HAProxy with a config written here.
``kill(i)`` SIGKILLs a replica and ``restart(i)`` starts it again on the same port; ``stop()``
ends everything. Raw JSON-RPC over HTTP (``post``) lets a test choose the replica and the headers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from tests.integration.gateway.http_gateway import READY_TIMEOUT_S, SERVING_LINE, STOP_TIMEOUT_S
from tests.integration.team.team_gateway import MCPFLEET, add_key, team_document, write_team_file
from tests.redis import RedisServer, start_redis

REPLICAS = 3
HANDSHAKE_VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def haproxy_config(port: int, replica_ports: list[int]) -> str:
    """Round-robin over every replica, no stickiness; a replica whose port refuses is retried
    elsewhere (``redispatch``) and taken out until it answers again (TCP checks)."""
    servers = "\n".join(
        f"    server r{index} 127.0.0.1:{replica} check inter 300ms fall 1 rise 1"
        for index, replica in enumerate(replica_ports)
    )
    return f"""global
    maxconn 1024

defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response

frontend mcp
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
{servers}
"""


@dataclass
class Replica:
    index: int
    port: int
    stderr_path: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@dataclass
class TeamCluster:
    folder: Path
    team_file: Path
    redis: RedisServer
    port: int
    keys: dict[str, str]
    replicas: list[Replica] = field(default_factory=list)
    replica_env: dict[int, dict[str, str]] = field(default_factory=dict)
    haproxy: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @classmethod
    def start(
        cls,
        folder: Path,
        servers: dict[str, Any],
        policies: list[dict[str, Any]],
        postgres_dsn: str,
        *,
        users: tuple[str, ...],
        replica_env: dict[int, dict[str, str]] | None = None,
        **more: Any,
    ) -> TeamCluster:
        redis = start_redis()
        port = free_port()
        document = team_document(
            servers,
            policies,
            state={"postgres": postgres_dsn, "redis": redis.url},
            **more,
        )
        document["public_url"] = f"http://127.0.0.1:{port}/mcp"
        team_file = write_team_file(folder / "team.json", document)
        cluster = cls(folder, team_file, redis, port, {}, replica_env=replica_env or {})
        try:
            cluster.keys = {user: add_key(team_file, user) for user in users}
            for index in range(REPLICAS):
                replica = Replica(index, free_port(), folder / f"replica-{index}.stderr")
                cluster.replicas.append(replica)
                cluster.restart(index)
            config = folder / "haproxy.cfg"
            config.write_text(haproxy_config(port, [replica.port for replica in cluster.replicas]))
            haproxy = shutil.which("haproxy", path=f"{os.environ.get('PATH', '')}:/usr/sbin")
            assert haproxy is not None, "HAProxy is not installed: run `make haproxy` as root"
            cluster.haproxy = subprocess.Popen(
                [haproxy, "-f", str(config), "-db"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=(folder / "haproxy.stderr").open("wb"),
                start_new_session=True,
            )
            _wait_for_port(port, cluster.haproxy)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def restart(self, index: int) -> None:
        """Start replica ``index`` (again) on its port and wait for its ``serving on`` line."""
        replica = self.replicas[index]
        environ = {**os.environ, "REPLICA": str(index), **self.replica_env.get(index, {})}
        command = [
            str(MCPFLEET),
            "serve",
            "--http",
            f"127.0.0.1:{replica.port}",
            "--team",
            str(self.team_file),
        ]
        with replica.stderr_path.open("ab") as stderr:
            replica.process = subprocess.Popen(
                command,
                cwd=self.folder,
                env=environ,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        start = replica.stderr_path.stat().st_size
        while time.monotonic() < deadline:
            text = replica.stderr_path.read_bytes()[start:].decode(errors="replace")
            if SERVING_LINE.search(text):
                return
            if replica.process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"replica {index} did not serve; its stderr ends: {self.stderr(index)[-2000:]}")

    def stderr(self, index: int) -> str:
        return self.replicas[index].stderr_path.read_text(errors="replace")

    def kill(self, index: int) -> None:
        """SIGKILL replica ``index`` alone (its backends see their stdin close and go)."""
        process = self.replicas[index].process
        assert process is not None
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)

    def stop(self) -> None:
        if self.haproxy is not None and self.haproxy.poll() is None:
            self.haproxy.kill()
            self.haproxy.wait(timeout=STOP_TIMEOUT_S)
        for replica in self.replicas:
            process = replica.process
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=STOP_TIMEOUT_S)
        self.redis.stop()


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"HAProxy exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("HAProxy did not listen")


def messages_of(response: httpx2.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an answer: its JSON body, or the data of its SSE events."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    found = []
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            found.append(json.loads(line[5:]))
    return found


def headers_for(key: str, session_id: str | None = None, **more: str) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {key}", "Accept": ACCEPT, "Content-Type": "application/json", **more}
    if session_id is not None:
        headers["Mcp-Session-Id"] = session_id
        headers["Mcp-Protocol-Version"] = HANDSHAKE_VERSION
    return headers


def initialize_request() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "cluster-test", "version": "1"},
        },
    }


def open_session(url: str, key: str) -> str:
    """A 2025-11-25 session opened at ``url`` (initialize, then initialized): its id."""
    with httpx2.Client(timeout=30) as http:
        opened = http.post(url, json=initialize_request(), headers=headers_for(key))
        assert opened.status_code == 200, opened.text
        session_id = opened.headers["mcp-session-id"]
        done = http.post(
            url,
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers=headers_for(key, session_id),
        )
        assert done.status_code == 202, done.text
    return session_id


def tool_call(request_id: int, name: str, arguments: dict[str, Any], **meta: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
