"""Service-account API keys end to end: ``mcpfleet team key add|revoke`` (the real command line)
writing the key file, and a team gateway accepting a key as ``service:NAME`` until it is
revoked, from the next request on, with no restart."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from tests.integration.team.identity_provider import IdentityGateway, running_identity_gateway, whoami_server

from mcpfleet.gateway.http import HttpListener, parse_bind, serve_http
from mcpfleet.team.api_keys import KEY_PREFIX, key_digest
from mcpfleet.team.identity import identity_check
from mcpfleet.team.model import IdentitySettings, StateSettings, TeamFile

MCPFLEET = Path(sys.executable).parent / "mcpfleet"
UNUSED_ISSUER = "http://127.0.0.1:1"
"""Keys never consult the issuer: its keys are fetched only for a JWT, and none is sent here."""


def team_file(folder: Path, api_keys: str | None = "keys/api-keys.json") -> Path:
    identity: dict[str, Any] = {"issuer": UNUSED_ISSUER}
    if api_keys is not None:
        identity["api_keys"] = api_keys
    path = folder / "team.json"
    path.write_text(json.dumps({"public_url": "https://mcp.example.com/mcp", "identity": identity}))
    return path


def mcpfleet(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(MCPFLEET), *arguments], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )


def test_add_prints_the_key_alone_and_stores_only_its_hash(tmp_path: Path) -> None:
    team = team_file(tmp_path)
    added = mcpfleet("team", "key", "add", "ci", "--team", str(team))
    assert added.returncode == 0, added.stderr
    key = added.stdout.removesuffix("\n")
    assert added.stdout == key + "\n" and key.startswith(KEY_PREFIX) and len(key) > 40
    key_file = tmp_path / "keys" / "api-keys.json"  # relative to the team file's folder
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    stored = key_file.read_text()
    assert key not in stored and key[len(KEY_PREFIX) :] not in stored
    assert json.loads(stored)["keys"]["ci"]["sha256"] == key_digest(key).hex()

    as_json = mcpfleet("team", "key", "add", "deploy-bot", "--team", str(team), "--json")
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert set(document) == {"name", "key"} and document["name"] == "deploy-bot"
    assert set(json.loads(key_file.read_text())["keys"]) == {"ci", "deploy-bot"}


def test_a_second_key_for_one_account_and_bad_names_are_refused(tmp_path: Path) -> None:
    team = team_file(tmp_path)
    assert mcpfleet("team", "key", "add", "ci", "--team", str(team)).returncode == 0
    again = mcpfleet("team", "key", "add", "ci", "--team", str(team))
    assert again.returncode == 1 and again.stdout == ""
    assert "has a key already; revoke it first" in again.stderr
    bad = mcpfleet("team", "key", "add", "../etc", "--team", str(team))
    assert bad.returncode == 2 and "service account name '../etc'" in bad.stderr


def test_revoke_forgets_the_key_and_says_when_there_was_none(tmp_path: Path) -> None:
    team = team_file(tmp_path)
    assert mcpfleet("team", "key", "add", "ci", "--team", str(team)).returncode == 0
    revoked = mcpfleet("team", "key", "revoke", "ci", "--team", str(team))
    assert revoked.returncode == 0, revoked.stderr
    assert json.loads((tmp_path / "keys" / "api-keys.json").read_text())["keys"] == {}
    missing = mcpfleet("team", "key", "revoke", "ci", "--team", str(team), "--json")
    assert missing.returncode == 1 and json.loads(missing.stdout) == {"name": "ci", "revoked": False}
    assert "'ci' has no key" in missing.stderr


def test_a_team_file_without_a_key_file_is_a_usage_error_naming_the_fix(tmp_path: Path) -> None:
    team = team_file(tmp_path, api_keys=None)
    answer = mcpfleet("team", "key", "add", "ci", "--team", str(team))
    assert answer.returncode == 2 and answer.stdout == ""
    assert f"{team}: identity.api_keys is not set" in answer.stderr
    unreadable = mcpfleet("team", "key", "add", "ci", "--team", str(tmp_path / "absent.yaml"))
    assert unreadable.returncode == 2 and "absent.yaml: no such file" in unreadable.stderr


async def whoami(gateway: IdentityGateway, key: str) -> httpx2.Response | dict[str, Any]:
    """The principal ``key`` names at ``gateway``, or the refusal."""
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(headers=headers) as http:
        probe = await http.post(
            gateway.public_url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Accept": "application/json, text/event-stream"},
        )
        if probe.status_code == 401:
            return probe
        async with Client(
            streamable_http_client(gateway.public_url, http_client=http), mode="legacy"
        ) as client:
            result = await client.call_tool("whoami", {})
    assert result.structured_content is not None
    return dict(result.structured_content)


@pytest.mark.anyio
async def test_a_key_is_a_service_account_until_revoked_without_a_restart(tmp_path: Path) -> None:
    team = team_file(tmp_path)
    key_file = tmp_path / "keys" / "api-keys.json"
    ci_key = mcpfleet("team", "key", "add", "ci", "--team", str(team)).stdout.strip()
    async with running_identity_gateway(UNUSED_ISSUER, api_keys=key_file) as gateway:
        assert await whoami(gateway, ci_key) == {
            "subject": "service:ci",
            "email": None,
            "groups": [],
            "service_account": "ci",
        }
        # Added while the gateway runs: known from its next request on.
        bot_key = mcpfleet("team", "key", "add", "bot", "--team", str(team)).stdout.strip()
        assert (await whoami(gateway, bot_key))["subject"] == "service:bot"  # type: ignore[index]
        assert mcpfleet("team", "key", "revoke", "ci", "--team", str(team)).returncode == 0
        refused = await whoami(gateway, ci_key)
        assert isinstance(refused, httpx2.Response) and "not one this gateway knows" in refused.text
        # A broken key file lets no key in (and the gateway keeps serving).
        key_file.write_text("{not json")
        assert isinstance(await whoami(gateway, bot_key), httpx2.Response)


@pytest.mark.anyio
@pytest.mark.parametrize("metrics", ["private", "public"])
async def test_the_team_files_identity_check_opens_metrics_only_when_public(
    tmp_path: Path, metrics: str
) -> None:
    listener = HttpListener.open(parse_bind("127.0.0.1:0"))
    team = TeamFile(
        path=tmp_path / "team.yaml",
        public_url=listener.url,
        servers={},
        identity=IdentitySettings(issuer=UNUSED_ISSUER, audience=listener.url),
        policies=(),
        state=StateSettings(sqlite_path=tmp_path / "state.sqlite3"),
        metrics="public" if metrics == "public" else "private",
    )
    async with anyio.create_task_group() as task_group:
        await task_group.start(
            lambda task_status: serve_http(
                whoami_server(),
                listener,
                auth_token=None,
                admission=identity_check(team).admit,
                notice=lambda _: None,
                task_status=task_status,
            )
        )
        async with httpx2.AsyncClient() as http:
            answers = [
                await http.get(listener.url.replace("/mcp", path)) for path in ("/metrics", "/healthz")
            ]
        task_group.cancel_scope.cancel()
    # 404: through the check to the server behind it, which has no such page.
    assert [answer.status_code for answer in answers] == [404 if metrics == "public" else 401, 404]
