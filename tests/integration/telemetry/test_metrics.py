"""``/metrics`` on a real team gateway (``mcpfleet serve --http --team FILE``): the Prometheus text,
read back with ``prometheus_client``'s own parser, counts the calls made through the gateway by
server and tool (their errors and latency too) and shows the fleet's servers, sessions and
processes; it needs a member's key unless the team file says ``metrics: public``."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.integration.team.team_gateway import (
    add_key,
    fake,
    running_team_gateway,
    team_document,
    write_team_file,
)
from tests.integration.team.test_team_gateway import client_of, listed_when_ready, text_of

pytestmark = pytest.mark.anyio

EVERYTHING = {"users": ["ann"], "allow": ["*"], "name": "ann-everything"}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text, by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_count_the_calls_by_server_and_tool_and_need_a_key(tmp_path: Path) -> None:
    servers = {"alpha": fake("alpha", "echo", "fail")}
    team_file = write_team_file(tmp_path / "team.json", team_document(servers, [EVERYTHING]))
    key = add_key(team_file, "ann")
    with running_team_gateway(team_file, "--no-cache") as gateway:
        metrics_url = gateway.url.removesuffix("/mcp") + "/metrics"
        async with client_of(gateway.url, key) as ann:
            await listed_when_ready(ann, ["alpha_echo", "alpha_fail"])
            for word in ("one", "two"):
                assert text_of(await ann.call_tool("alpha_echo", {"message": word})) == word
            assert (await ann.call_tool("alpha_fail", {"message": "no"})).is_error

            async with httpx2.AsyncClient(timeout=httpx2.Timeout(20.0)) as http:
                refused = await http.get(metrics_url)
                answer = await http.get(metrics_url, headers={"Authorization": f"Bearer {key}"})
        assert refused.status_code == 401
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain")
        found = samples(answer.text)
        echo = (("server", "alpha"), ("tool", "echo"))
        fail = (("server", "alpha"), ("tool", "fail"))
        assert found[("mcpfleet_calls_total", echo)] == 2
        assert found[("mcpfleet_calls_total", fail)] == 1
        assert found[("mcpfleet_call_errors_total", fail)] == 1
        assert ("mcpfleet_call_errors_total", echo) not in found
        assert found[("mcpfleet_call_duration_seconds_count", echo)] == 2
        assert found[("mcpfleet_call_duration_seconds_bucket", tuple(sorted((*echo, ("le", "+Inf")))))] == 2
        assert found[("mcpfleet_servers", (("state", "connected"),))] == 1
        assert found[("mcpfleet_sessions", ())] >= 1
        assert found[("mcpfleet_processes", ())] == 1


async def test_public_metrics_need_no_key(tmp_path: Path) -> None:
    document = team_document({"alpha": fake("alpha", "echo")}, [EVERYTHING], metrics="public")
    team_file = write_team_file(tmp_path / "team.json", document)
    with running_team_gateway(team_file, "--no-cache") as gateway:
        async with httpx2.AsyncClient(timeout=httpx2.Timeout(20.0)) as http:
            answer = await http.get(gateway.url.removesuffix("/mcp") + "/metrics")
            posted = await http.post(gateway.url.removesuffix("/mcp") + "/metrics", content=b"")
    assert answer.status_code == 200, answer.text
    assert ("mcpfleet_processes", ()) in samples(answer.text)
    assert posted.status_code == 405
