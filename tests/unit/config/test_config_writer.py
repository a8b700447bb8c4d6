"""Atomic edits of mcpfleet's own files: add/remove/enable/disable, permissions kept,
links never written through, foreign files never written, concurrent edits never lost."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import threading
from pathlib import Path

import pytest
from tests.unit.config.config_helpers import WriteFile, discover, entry

from mcpfleet import paths
from mcpfleet.config.writer import add_server, remove_server, set_server_enabled, update_json_file
from mcpfleet.errors import ConfigError, ConfigWriteError, UnsafeConfigPathError


def read(path: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(path.read_text())
    return data


def test_add_and_remove(project: Path) -> None:
    path = paths.user_config_file()
    add_server(path, "files", {"command": "npx", "args": ["fs"]})
    assert read(path) == {"mcpServers": {"files": {"command": "npx", "args": ["fs"]}}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert discover(project).configs["files"].args == ("fs",)
    with pytest.raises(ConfigWriteError, match="already exists"):
        add_server(path, "files", {"command": "other"})
    remove_server(path, "files")
    assert read(path) == {}
    with pytest.raises(ConfigWriteError, match="not found"):
        remove_server(path, "files")


def test_add_refuses_invalid_entries(project: Path) -> None:
    with pytest.raises(ConfigError, match="both"):
        add_server(paths.user_config_file(), "x", {"command": "a", "url": "https://b"})
    with pytest.raises(ConfigError, match="server name"):
        add_server(paths.user_config_file(), "bad name", {"command": "a"})
    assert not paths.user_config_file().exists()


def test_other_keys_and_permissions_are_kept(write: WriteFile) -> None:
    path = write(paths.user_config_file(), {"$schema": "s", "mcpServers": {}})
    path.chmod(0o640)
    add_server(path, "a", {"command": "a"})
    assert read(path)["$schema"] == "s"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # owner-only: group bits dropped
    path.chmod(0o400)
    add_server(path, "b", {"command": "b"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o400


def test_a_linked_config_file_is_never_written_through(tmp_path: Path, write: WriteFile) -> None:
    real = write(tmp_path / "dotfiles" / "mcp.json", {"mcpServers": {}})
    before = real.read_bytes()
    link = paths.user_config_file()
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    with pytest.raises(UnsafeConfigPathError, match="symbolic link") as caught:
        add_server(link, "a", {"command": "a"}, root=paths.user_config_dir())
    assert str(link) in str(caught.value)
    assert link.is_symlink() and real.read_bytes() == before


def test_a_linked_config_folder_is_edited_in_place(tmp_path: Path, write: WriteFile) -> None:
    dotfiles = tmp_path / "dotfiles"
    write(dotfiles / "mcp.json", {"mcpServers": {}})
    paths.user_config_dir().parent.mkdir(parents=True)
    paths.user_config_dir().symlink_to(dotfiles)  # the whole folder lives in the dotfiles
    add_server(paths.user_config_file(), "a", {"command": "a"}, root=paths.user_config_dir())
    assert "a" in read(dotfiles / "mcp.json")["mcpServers"]  # type: ignore[operator]


def test_project_edits_never_leave_the_project(project: Path, tmp_path: Path, write: WriteFile) -> None:
    foreign = write(tmp_path / "other-tool" / "mcp.json", {"mcpServers": {"p": {"command": "p"}}})
    foreign.chmod(0o644)
    before = foreign.read_bytes()
    own = paths.project_config_file(project)
    own.parent.mkdir()
    own.symlink_to(foreign)
    with pytest.raises(UnsafeConfigPathError, match="symbolic link"):
        set_server_enabled("p", False, project_root=project)
    with pytest.raises(UnsafeConfigPathError, match="symbolic link"):
        remove_server(own, "p", root=project)
    own.unlink()
    own.parent.rmdir()
    (project / ".mcpfleet").symlink_to(foreign.parent)
    with pytest.raises(UnsafeConfigPathError, match="outside"):
        add_server(own, "q", {"command": "q"}, root=project)
    assert foreign.read_bytes() == before and stat.S_IMODE(foreign.stat().st_mode) == 0o644
    assert sorted(os.listdir(foreign.parent)) == ["mcp.json"]  # no lock or temporary file either


def test_a_planted_lock_link_is_not_followed(project: Path, tmp_path: Path) -> None:
    target = tmp_path / "created-elsewhere"
    own = paths.project_config_file(project)
    own.parent.mkdir()
    (own.parent / f".{own.name}.lock").symlink_to(target)
    with pytest.raises(ConfigWriteError, match="cannot write"):
        add_server(own, "a", {"command": "a"}, root=project)
    assert not target.exists()


def test_malformed_own_file_is_not_overwritten(write: WriteFile) -> None:
    path = write(paths.user_config_file(), "{oops")
    with pytest.raises(ConfigWriteError, match="fix or remove"):
        add_server(path, "a", {"command": "a"})
    assert path.read_text() == "{oops"


def test_disable_and_enable_a_foreign_server_use_the_user_lists(
    project: Path, home: Path, write: WriteFile
) -> None:
    claude = write(home / ".claude.json", {"mcpServers": {"gh": {"command": "gh", "enabled": False}}})
    before = claude.read_bytes()
    assert set_server_enabled("gh", True, project_root=project) == paths.user_config_file()
    assert read(paths.user_config_file()) == {"enabledServers": ["gh"]}
    assert entry(discover(project), "gh").state == "active"
    set_server_enabled("gh", False, project_root=project)
    assert read(paths.user_config_file()) == {"disabledServers": ["gh"]}
    assert entry(discover(project), "gh").state == "disabled"
    assert claude.read_bytes() == before  # another tool's file is never written


def test_disable_own_server_edits_its_entry(project: Path, write: WriteFile) -> None:
    own = write(paths.project_config_file(project), {"mcpServers": {"p": {"command": "p"}}})
    write(paths.user_config_file(), {"disabledServers": ["p"]})
    assert set_server_enabled("p", False, project_root=project) == own
    assert read(own) == {"mcpServers": {"p": {"command": "p", "enabled": False}}}
    set_server_enabled("p", True, project_root=project)
    assert read(own) == {"mcpServers": {"p": {"command": "p"}}}
    assert read(paths.user_config_file()) == {}  # the stale deny entry is cleared


def _add_many(path: str, prefix: str, count: int) -> None:
    for index in range(count):
        add_server(Path(path), f"{prefix}-{index}", {"command": f"{prefix}{index}"})


def test_concurrent_edits_from_threads_and_processes_are_not_lost() -> None:
    path = paths.user_config_file()
    count = 15
    context = multiprocessing.get_context("spawn")
    workers: list[threading.Thread | multiprocessing.process.BaseProcess] = [
        *(threading.Thread(target=_add_many, args=(str(path), f"t{n}", count)) for n in range(3)),
        *(context.Process(target=_add_many, args=(str(path), f"p{n}", count)) for n in range(2)),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert all(getattr(worker, "exitcode", 0) == 0 for worker in workers)
    servers = read(path)["mcpServers"]
    assert isinstance(servers, dict) and len(servers) == 5 * count
    assert not [name for name in os.listdir(path.parent) if name.endswith(".tmp")]


def test_update_writes_nothing_when_nothing_changes() -> None:
    path = paths.user_config_file()
    update_json_file(path, lambda document: None)
    assert not path.exists()
