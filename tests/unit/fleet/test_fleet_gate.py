"""The start-up gate's decision and the start-up report, without any server."""

from __future__ import annotations

from mcpfleet.config.model import DiscoveredEntry, DiscoveryResult, ServerConfig, SourceInfo
from mcpfleet.errors import Failure
from mcpfleet.fleet.startup import GateDecision, StartupReport, decide_gate

SOURCE = SourceInfo("mcpfleet", "mcpfleet", "/project/.mcpfleet/mcp.json", "project")


def test_cached_servers_are_deferred_and_uncached_ones_waited_for() -> None:
    unfinished = {"cached": True, "cold": False, "also-cached": True, "also-cold": False}
    assert decide_gate(unfinished, "wait") == GateDecision(
        deferred=("cached", "also-cached"), waited=("cold", "also-cold")
    )


def test_late_join_lets_uncached_servers_come_later() -> None:
    assert decide_gate({"cold": False, "cached": True}, "late-join") == GateDecision(
        deferred=("cached",), late=("cold",)
    )


def test_nothing_unfinished_means_nothing_to_decide() -> None:
    assert decide_gate({}, "wait") == GateDecision()


def test_the_first_failure_of_a_subject_is_the_one_reported() -> None:
    report = StartupReport()
    report.add_failure(Failure("files", "connect", "exited with code 2"))
    report.add_failure(Failure("files", "connect", "did not become ready"))
    report.add_failure(Failure(".mcp.json", "discovery", "disk on fire"))
    assert report.errors == {"files": "exited with code 2", ".mcp.json": "disk on fire"}
    assert [(f.path, f.error) for f in report.failures] == [
        ("mcp:files", "exited with code 2"),
        (".mcp.json", "disk on fire"),
    ]
    assert report.failures[0].to_dict() == {"path": "mcp:files", "error": "exited with code 2"}
    assert report.failures[0].server == "files" and report.failures[1].server is None


def test_discovery_completes_the_report_with_what_cannot_start() -> None:
    active = ServerConfig(name="active", transport="stdio", command="x")
    discovery = DiscoveryResult(
        configs={"active": active},
        entries=[
            DiscoveredEntry("active", "active", "", SOURCE, active),
            DiscoveredEntry("off", "disabled", "disabled in its config", SOURCE, None),
            DiscoveredEntry("waiting", "pending-approval", "not approved", SOURCE, None),
            DiscoveredEntry("broken", "invalid", 'MCP server "broken" has no command', SOURCE, None),
            DiscoveredEntry("hidden", "shadowed", "shadowed", SOURCE, None),
        ],
    )
    report = StartupReport()
    report.complete_from(discovery)
    assert report.exa_api_keys == []  # the agent layer fills them: the fleet names no product
    assert report.disabled_servers == ["off"]
    assert [(f.subject, f.kind) for f in report.failures] == [("waiting", "approval"), ("broken", "invalid")]
    assert "mcpfleet approve waiting" in report.errors["waiting"]
    assert str(SOURCE.path) in report.errors["waiting"]
