"""Who shares which backend (``daemon.sharing``): the decision from two discoveries, and the
servers remembered as needing a backend per session."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from mcpfleet.config.model import DiscoveryResult, Level, ServerConfig, Share, SourceInfo, fingerprint_of
from mcpfleet.daemon.sharing import PerSessionServers, assign


def server(name: str, *args: str, share: Share | None = None, cwd: str = "/home/user") -> ServerConfig:
    config = ServerConfig(name, "stdio", command="server-bin", args=args, cwd=cwd, share=share)
    return replace(config, fingerprint=fingerprint_of(config))


def discovery(*entries: tuple[ServerConfig, Level]) -> DiscoveryResult:
    result = DiscoveryResult()
    for config, level in entries:
        result.configs[config.name] = config
        result.sources[config.name] = SourceInfo("mcpfleet", "mcpfleet", f"/{level}/mcp.json", level)
    return result


def shares(
    project: DiscoveryResult, user: DiscoveryResult, **options: frozenset[tuple[str, str]]
) -> dict[str, str]:
    return {name: assignment.share for name, assignment in assign(project, user, **options).items()}


def test_each_level_has_its_default_and_an_entry_may_choose() -> None:
    common, chosen = server("common"), server("chosen", share="project")
    mine = server("mine", share="session")
    user = discovery((common, "user"), (chosen, "user"), (mine, "user"))
    project = discovery(
        (common, "user"),
        (chosen, "user"),
        (mine, "user"),
        (server("build", cwd="/p"), "project"),
        (server("notes", cwd="/p"), "local"),
        (server("own", share="session", cwd="/p"), "project"),
    )
    assert shares(project, user) == {
        "common": "user",
        "chosen": "project",
        "mine": "session",
        "build": "project",
        "notes": "project",
        "own": "session",
    }


def test_a_user_entry_this_project_resolves_otherwise_is_shared_by_the_project_only() -> None:
    """``${workspaceFolder}`` in a user-level entry: each project must get its own folder."""
    user = discovery((server("files", "/home/user"), "user"))
    project = discovery((server("files", "/work/alpha"), "user"))
    assert shares(project, user) == {"files": "project"}
    assert shares(user, user) == {"files": "user"}


def test_a_project_entry_that_shadows_a_user_one_is_the_projects() -> None:
    user = discovery((server("tools"), "user"))
    project = discovery((server("tools", "--project-build", cwd="/p"), "project"))
    assert shares(project, user) == {"tools": "project"}


def test_a_server_learnt_to_need_a_backend_per_session_gets_one_until_its_entry_changes() -> None:
    common = server("common")
    user = discovery((common, "user"))
    learnt = frozenset({("common", common.fingerprint)})
    assert shares(user, user, per_session=learnt) == {"common": "session"}
    edited = server("common", "--new")
    assert shares(discovery((edited, "user")), discovery((edited, "user")), per_session=learnt) == {
        "common": "user"
    }


def test_the_servers_learnt_per_session_are_remembered_for_the_next_daemon(tmp_path: Path) -> None:
    path = tmp_path / "state" / "daemon-per-session.json"
    first = PerSessionServers(path)
    assert first.known == frozenset()
    assert first.add("ask", "f1") is True
    assert first.add("ask", "f1") is False
    assert first.add("other", "f2") is True
    assert PerSessionServers(path).known == {("ask", "f1"), ("other", "f2")}


def test_an_unreadable_per_session_file_remembers_nothing(tmp_path: Path) -> None:
    path = tmp_path / "daemon-per-session.json"
    for text in ("not json", "[]", '{"servers": {"ask": 1}}', '{"servers": [{"name": 1}, "x"]}'):
        path.write_text(text)
        assert PerSessionServers(path).known == frozenset()
