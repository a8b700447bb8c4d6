"""A team replica's health, readiness and drain, on a real ``mcpfleet serve --http --team`` process.

``/healthz`` answers while the process serves; ``/readyz`` is 200 only when the team state
answers, the issuer's keys are fetched (the real OpenID provider of these tests) and every
backend has settled, else 503 naming what is missing. SIGTERM drains: ``/readyz`` fails, new
sessions and 2026-07-28 requests are refused with 503, the calls in flight (one of each era,
on a tool that answers when the test says so) get their answers, then the process exits 0 with
its backend gone; a call that outlives ``drain_timeout`` is cut, and the process exits all the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import pytest
from psycopg import sql
from tests.integration.gateway.gateway_harness import wait_until
from tests.integration.team.identity_provider import IdentityProvider
from tests.integration.team.team_gateway import (
    TeamGatewayProcess,
    add_key,
    fake,
    running_team_gateway,
    team_document,
    write_team_file,
)
from tests.integration.team.test_team_gateway import client_of, text_of

pytestmark = pytest.mark.anyio

WAIT_S = 60.0
"""A hang guard only: every wait below ends on an event (an answer, a file, an exit)."""
MODERN = "2026-07-28"
ACCEPT = "application/json, text/event-stream"
EVERYONE = [{"allow": ["*"], "name": "everyone"}]


def slow_server(pid_file: Path, *more: str) -> dict[str, Any]:
    entry = fake("slow", "wait_for", "echo")
    return {**entry, "args": [*entry["args"], "--pid-file", str(pid_file), *more]}


def team_file_for(folder: Path, issuer: str, servers: dict[str, Any], **more: Any) -> Path:
    document = team_document(servers, EVERYONE, **more)
    document["identity"] = {**document["identity"], "issuer": issuer}
    return write_team_file(folder / "team.json", document)


def base_of(gateway: TeamGatewayProcess) -> str:
    return gateway.url.removesuffix("/mcp")


async def readiness(http: httpx2.AsyncClient, gateway: TeamGatewayProcess) -> tuple[int, dict[str, Any]]:
    answer = await http.get(base_of(gateway) + "/readyz")
    return answer.status_code, answer.json()


async def wait_for_readiness(
    http: httpx2.AsyncClient, gateway: TeamGatewayProcess, status: int
) -> dict[str, Any]:
    """The body of ``/readyz`` once it answers ``status``."""
    seen: list[dict[str, Any]] = []

    async def answers() -> bool:
        code, body = await readiness(http, gateway)
        seen.append(body)
        return code == status

    await wait_until(answers, timeout_s=WAIT_S)
    return seen[-1]


def modern_message(name: str, arguments: dict[str, Any], request_id: int = 7) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "drain-test", "version": "1"},
    }
    params = {"name": name, "arguments": arguments, "_meta": meta}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def modern_headers(key: str, name: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {key}",
        "Accept": ACCEPT,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }


def initialize_message() -> dict[str, Any]:
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "drain-test", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


def backend_pids(pid_file: Path) -> list[int]:
    return [int(line) for line in pid_file.read_text().split()]


def is_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(FileNotFoundError):  # a zombie is not running
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    return False


def exit_code_of(process: subprocess.Popen[bytes]) -> int:
    return process.wait(timeout=WAIT_S)


async def test_healthz_and_readyz_need_no_token_and_ready_means_every_part_answers(
    tmp_path: Path, identity_provider: IdentityProvider
) -> None:
    late = tmp_path / "late-may-start"
    servers = {"slow": slow_server(tmp_path / "slow.pid"), "late": {**fake("late", "echo")}}
    servers["late"]["args"] = [*servers["late"]["args"], "--start-when-exists", str(late)]
    team_file = team_file_for(tmp_path, identity_provider.issuer, servers)
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(20.0)) as http:
            health = await http.get(base_of(gateway) + "/healthz")
            assert (health.status_code, health.json()) == (200, {"status": "serving"})
            assert health.headers["content-type"] == "application/json"

            # "late" waits for the test's word before its handshake: the replica is not ready.
            only_late = (503, {"ready": False, "not_ready": {"servers": "still starting: late"}})

            async def only_late_is_missing() -> bool:
                return await readiness(http, gateway) == only_late

            await wait_until(only_late_is_missing, timeout_s=WAIT_S)
            late.touch()
            assert await wait_for_readiness(http, gateway, 200) == {"ready": True}
            head = await http.head(base_of(gateway) + "/readyz")
            assert (head.status_code, head.content) == (200, b"")
            refused = await http.post(base_of(gateway) + "/readyz")
            assert refused.status_code == 405

            # A server a reload adds is not waited for: every replica reloads at once, and all
            # of them leaving the balancer together would be an outage.
            added_pid = tmp_path / "added.pid"
            added = fake("added", "echo")
            held_back = ["--pid-file", str(added_pid), "--start-when-exists", str(tmp_path / "never")]
            added["args"] = [*added["args"], *held_back]
            document = json.loads(team_file.read_text())
            write_team_file(team_file, {**document, "servers": {**document["servers"], "added": added}})
            await wait_until(added_pid.exists, timeout_s=WAIT_S)  # started, its handshake held back
            assert await readiness(http, gateway) == (200, {"ready": True})


async def test_readyz_names_an_issuer_whose_keys_cannot_be_fetched(tmp_path: Path) -> None:
    team_file = team_file_for(tmp_path, "http://127.0.0.1:1", {"slow": slow_server(tmp_path / "slow.pid")})
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(20.0)) as http:
            await wait_until(lambda: _only_the_issuer_fails(http, gateway), timeout_s=WAIT_S)
            _, body = await readiness(http, gateway)
            assert "http://127.0.0.1:1" in body["not_ready"]["issuer"]
            health = await http.get(base_of(gateway) + "/healthz")
            assert health.status_code == 200  # alive all the same: nothing a restart would fix


async def _only_the_issuer_fails(http: httpx2.AsyncClient, gateway: TeamGatewayProcess) -> bool:
    status, body = await readiness(http, gateway)
    return status == 503 and list(body["not_ready"]) == ["issuer"]


async def test_readyz_fails_when_the_state_database_is_gone(
    tmp_path: Path, identity_provider: IdentityProvider, postgres_dsn: str
) -> None:
    servers = {"slow": slow_server(tmp_path / "slow.pid")}
    team_file = team_file_for(tmp_path, identity_provider.issuer, servers, state={"postgres": postgres_dsn})
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(20.0)) as http:
            await wait_for_readiness(http, gateway, 200)
            name = psycopg.conninfo.conninfo_to_dict(postgres_dsn)["dbname"]
            admin_dsn = postgres_dsn.rsplit("/", 1)[0] + "/postgres"
            with psycopg.connect(admin_dsn, autocommit=True) as admin:
                admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(str(name))))
            body = await wait_for_readiness(http, gateway, 503)
            assert list(body["not_ready"]) == ["state"]
            password = str(psycopg.conninfo.conninfo_to_dict(postgres_dsn)["password"])
            assert password not in json.dumps(body)


async def test_sigterm_drains_the_calls_in_flight_refuses_new_work_and_exits(
    tmp_path: Path, identity_provider: IdentityProvider
) -> None:
    pid_file = tmp_path / "slow.pid"
    team_file = team_file_for(
        tmp_path, identity_provider.issuer, {"slow": slow_server(pid_file)}, drain_timeout=600
    )
    key = add_key(team_file, "ci")
    legacy_release, modern_release = tmp_path / "legacy-release", tmp_path / "modern-release"
    answers: dict[str, str] = {}
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(WAIT_S)) as http:
            await wait_for_readiness(http, gateway, 200)
            async with client_of(gateway.url, key) as legacy, anyio.create_task_group() as calls:
                # A host lists before it calls (the client checks a result against the list, and
                # once the drain is over the replica answers nothing more).
                assert "slow_wait_for" in [tool.name for tool in (await legacy.list_tools()).tools]

                async def legacy_call() -> None:
                    result = await legacy.call_tool("slow_wait_for", {"path": str(legacy_release)})
                    answers["legacy"] = text_of(result)

                async def modern_call() -> None:
                    message = modern_message("slow_wait_for", {"path": str(modern_release)})
                    posted = await http.post(
                        gateway.url, json=message, headers=modern_headers(key, "slow_wait_for")
                    )
                    assert posted.status_code == 200, posted.text
                    answers["modern"] = posted.json()["result"]["content"][0]["text"]

                calls.start_soon(legacy_call)
                calls.start_soon(modern_call)
                await wait_until(
                    lambda: all(
                        Path(f"{release}.started").exists() for release in (legacy_release, modern_release)
                    ),
                    timeout_s=WAIT_S,
                )

                gateway.process.send_signal(signal.SIGTERM)  # as Kubernetes does: to the process
                body = await wait_for_readiness(http, gateway, 503)
                assert list(body["not_ready"]) == ["draining"]
                opening = await http.post(
                    gateway.url,
                    json=initialize_message(),
                    headers={"Authorization": f"Bearer {key}", "Accept": ACCEPT},
                )
                assert opening.status_code == 503 and "draining" in opening.text
                assert opening.headers["retry-after"] == "1"
                new_modern = await http.post(
                    gateway.url,
                    json=modern_message("slow_echo", {"message": "late"}, request_id=8),
                    headers=modern_headers(key, "slow_echo"),
                )
                assert new_modern.status_code == 503
                assert (await http.get(base_of(gateway) + "/healthz")).status_code == 200
                # The session this replica holds is still served (its next call included).
                assert text_of(await legacy.call_tool("slow_echo", {"message": "mine"})) == "mine"
                # Both calls hold the replica: nothing has answered them, so it still runs.
                assert gateway.process.poll() is None

                legacy_release.touch()
                modern_release.touch()
            assert answers == {
                "legacy": f"released by {legacy_release}",
                "modern": f"released by {modern_release}",
            }
        assert exit_code_of(gateway.process) == 0
        assert "Traceback" not in gateway.stderr
        assert "drained: every request in flight was answered" in gateway.stderr
    assert not [pid for pid in backend_pids(pid_file) if is_running(pid)]


async def test_a_call_whose_stream_is_resumed_while_draining_gets_its_answer(
    tmp_path: Path, identity_provider: IdentityProvider
) -> None:
    """The call's own stream broke before SIGTERM and the client resumed it (``Last-Event-ID``):
    the drain waits for that resumed stream, which carries the answer."""
    team_file = team_file_for(
        tmp_path, identity_provider.issuer, {"slow": slow_server(tmp_path / "slow.pid")}, drain_timeout=600
    )
    key = add_key(team_file, "ci")
    release = tmp_path / "release"
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(WAIT_S)) as http:
            await wait_for_readiness(http, gateway, 200)
            headers = {"Authorization": f"Bearer {key}", "Accept": ACCEPT}
            opened = await http.post(gateway.url, json=initialize_message(), headers=headers)
            session = {
                **headers,
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "MCP-Protocol-Version": "2025-11-25",
            }
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(gateway.url, json=initialized, headers=session)
            call = {
                "jsonrpc": "2.0",
                "id": 5,
                "method": "tools/call",
                "params": {"name": "slow_wait_for", "arguments": {"path": str(release)}},
            }
            prefers_stream = {**session, "Accept": "text/event-stream, application/json;q=0.5"}
            async with http.stream("POST", gateway.url, json=call, headers=prefers_stream) as streamed:
                priming = await _first_event_id(streamed)
            # That stream is gone; the call runs on in its session. The client resumes it.
            await wait_until(lambda: Path(f"{release}.started").exists(), timeout_s=WAIT_S)
            resuming = {**session, "Accept": "text/event-stream", "Last-Event-ID": priming}
            async with http.stream("GET", gateway.url, headers=resuming) as resumed:
                assert resumed.status_code == 200
                gateway.process.send_signal(signal.SIGTERM)
                await wait_for_readiness(http, gateway, 503)
                assert gateway.process.poll() is None  # the resumed stream holds the drain
                release.touch()
                answer = await _next_message(resumed)
        assert answer["id"] == 5
        assert answer["result"]["content"][0]["text"] == f"released by {release}"
        assert exit_code_of(gateway.process) == 0
        assert "Traceback" not in gateway.stderr
        assert "drained: every request in flight was answered" in gateway.stderr


async def _first_event_id(stream: httpx2.Response) -> str:
    async for line in stream.aiter_lines():
        if line.startswith("id:"):
            return line[3:].strip()
    raise AssertionError("the stream ended before its priming event")


async def _next_message(stream: httpx2.Response) -> dict[str, Any]:
    async for line in stream.aiter_lines():
        if line.startswith("data:") and line[5:].strip():
            message: dict[str, Any] = json.loads(line[5:])
            return message
    raise AssertionError("the resumed stream ended without a message")


async def test_calls_longer_than_drain_timeout_are_cut_and_the_replica_exits(
    tmp_path: Path, identity_provider: IdentityProvider
) -> None:
    pid_file = tmp_path / "slow.pid"
    team_file = team_file_for(
        tmp_path, identity_provider.issuer, {"slow": slow_server(pid_file)}, drain_timeout=1
    )
    key = add_key(team_file, "ci")
    never_legacy, never_modern = tmp_path / "never-legacy", tmp_path / "never-modern"
    outcome: dict[str, str] = {}
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(WAIT_S)) as http:
            await wait_for_readiness(http, gateway, 200)
            async with client_of(gateway.url, key) as legacy, anyio.create_task_group() as calls:
                await legacy.list_tools()

                async def legacy_call() -> None:
                    try:
                        await legacy.call_tool("slow_wait_for", {"path": str(never_legacy)})
                    except Exception as error:
                        outcome["legacy"] = f"failed: {error}"
                    else:
                        outcome["legacy"] = "answered"

                async def modern_call() -> None:
                    message = modern_message("slow_wait_for", {"path": str(never_modern)})
                    posted = await http.post(
                        gateway.url, json=message, headers=modern_headers(key, "slow_wait_for")
                    )
                    outcome["modern"] = f"{posted.status_code}: {posted.json()['error']['message']}"

                calls.start_soon(legacy_call)
                calls.start_soon(modern_call)
                started = [Path(f"{release}.started") for release in (never_legacy, never_modern)]
                await wait_until(lambda: all(path.exists() for path in started), timeout_s=WAIT_S)
                gateway.process.send_signal(signal.SIGTERM)
        assert exit_code_of(gateway.process) == 0
        assert "Traceback" not in gateway.stderr
        assert "drain_timeout (1 s) reached: cutting 2 request(s) still in flight" in gateway.stderr
    # Each is told why, neither got an answer of the tool's: the 2026-07-28 call as its JSON
    # answer, the session's call as the last event of its stream (begun with its priming event).
    cut = "the gateway replica stopped before this request finished"
    assert outcome["modern"].startswith(f"200: {cut}") and "drain_timeout (1 s)" in outcome["modern"]
    assert outcome["legacy"].startswith(f"failed: {cut}")
    assert not [pid for pid in backend_pids(pid_file) if is_running(pid)]


async def test_sigint_during_a_drain_stops_the_replica_at_once(
    tmp_path: Path, identity_provider: IdentityProvider
) -> None:
    pid_file = tmp_path / "slow.pid"
    team_file = team_file_for(
        tmp_path, identity_provider.issuer, {"slow": slow_server(pid_file)}, drain_timeout=3600
    )
    key = add_key(team_file, "ci")
    never = tmp_path / "never-released"
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(WAIT_S)) as http:
            await wait_for_readiness(http, gateway, 200)
            async with anyio.create_task_group() as calls:

                async def held_call() -> None:
                    message = modern_message("slow_wait_for", {"path": str(never)})
                    with contextlib.suppress(httpx2.HTTPError):
                        await http.post(
                            gateway.url, json=message, headers=modern_headers(key, "slow_wait_for")
                        )

                calls.start_soon(held_call)
                await wait_until(lambda: Path(f"{never}.started").exists(), timeout_s=WAIT_S)
                gateway.process.send_signal(signal.SIGTERM)
                await wait_for_readiness(http, gateway, 503)
                # The drain would wait an hour for that call; Ctrl-C does not.
                gateway.process.send_signal(signal.SIGINT)
                exit_code_of(gateway.process)
        assert "drained: every" not in gateway.stderr and "reached: cutting" not in gateway.stderr
        assert "Traceback" not in gateway.stderr
    assert not [pid for pid in backend_pids(pid_file) if is_running(pid)]
