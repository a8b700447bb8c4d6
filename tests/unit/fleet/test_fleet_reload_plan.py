"""Reload planning, without any server: what stops, what starts, what is left alone."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from mcpfleet.config.model import ServerConfig, fingerprint_of
from mcpfleet.fleet.reload import ConfigWatcher, KnownServer, plan_reload, stamp_files


def config(name: str, command: str = "server") -> ServerConfig:
    plain = ServerConfig(name=name, transport="stdio", command=command)
    return ServerConfig(name=name, transport="stdio", command=command, fingerprint=fingerprint_of(plain))


def known(*servers: tuple[ServerConfig, bool]) -> dict[str, KnownServer]:
    return {c.name: KnownServer(c.fingerprint, running) for c, running in servers}


def test_added_removed_changed_and_kept() -> None:
    keep, change, drop = config("keep"), config("change"), config("drop")
    wanted = {"keep": keep, "change": config("change", "another-server"), "new": config("new")}
    plan = plan_reload(known((keep, True), (change, True), (drop, True)), wanted)
    assert plan.removed == ("drop",)
    assert plan.changed == ("change",)
    assert plan.stop == ("drop", "change")
    assert dict(plan.start) == {"change": wanted["change"], "new": wanted["new"]}
    assert plan.kept == 1
    assert plan.summary() == "2 added or restarted, 1 changed, 1 removed, 1 kept"


def test_an_unchanged_server_that_is_not_running_is_started_again_without_being_stopped() -> None:
    failed, running = config("failed"), config("running")
    plan = plan_reload(known((failed, False), (running, True)), {"failed": failed, "running": running})
    assert plan.stop == ()
    assert list(plan.start) == ["failed"]
    assert plan.kept == 1


def test_an_empty_discovery_stops_everything() -> None:
    plan = plan_reload(known((config("a"), True), (config("b"), False)), {})
    assert plan.stop == ("a", "b") and not plan.start and plan.kept == 0


def test_file_stamps_change_with_content_and_absence(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    missing = str(tmp_path / "absent.json")
    path.write_text("{}")
    before = stamp_files([str(path), missing])
    assert before[missing] is None and before[str(path)] is not None
    path.write_text('{"mcpServers": {}}')
    assert stamp_files([str(path)])[str(path)] != before[str(path)]


@pytest.mark.anyio
async def test_watching_more_files_keeps_a_change_not_reloaded_yet(tmp_path: Path) -> None:
    """``watch`` adds files without stamping again those it watches already: an edit made
    before it still reloads; the added file is watched from then on."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text("{}")
    watcher = ConfigWatcher(0.01)
    watcher.remember([str(first)])
    first.write_text('{"edited": true}')
    watcher.watch([str(first), str(second)])
    reloads = 0
    reloaded = anyio.Event()

    async def reload() -> None:
        nonlocal reloads, reloaded
        reloads += 1
        reloaded.set()
        reloaded = anyio.Event()

    async with anyio.create_task_group() as watching:
        watching.start_soon(watcher.run, reload)
        with anyio.fail_after(10):
            await reloaded.wait()
            assert reloads == 1
            second.write_text("{}")
            await reloaded.wait()
            assert reloads == 2
        watching.cancel_scope.cancel()
