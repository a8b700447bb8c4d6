"""An agent session's lifetime is one ``async with``: whatever ends the block (the body's own
error included) closes the fleet, and nothing is started before the block begins.

No server process is needed: an empty fleet still has the manager's task group, which is
what a half-closed session would leak."""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.abc
import pytest

from mcpfleet import create_agent_session, open_agent_session
from mcpfleet.errors import ConfigError

pytestmark = pytest.mark.anyio


async def test_open_agent_session_closes_the_fleet_when_the_body_raises(tmp_path: Path) -> None:
    cancelled = anyio.Event()

    async def runs_in_the_fleet(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        try:
            task_status.started()
            await anyio.sleep_forever()
        finally:
            cancelled.set()

    with pytest.raises(LookupError, match="the host's own failure"):
        async with open_agent_session(tmp_path, cache=None) as session:
            manager = session.mcp_manager
            await manager.task_group.start(runs_in_the_fleet)
            raise LookupError("the host's own failure")
    assert cancelled.is_set()
    with pytest.raises(RuntimeError, match="not running"):
        manager.task_group  # noqa: B018  (the property raises once the manager is closed)


async def test_nothing_starts_before_the_session_is_entered(tmp_path: Path) -> None:
    session = await create_agent_session(tmp_path, cache=None)
    # An error here, before `async with session`, would leave nothing running behind it.
    with pytest.raises(RuntimeError, match="not running"):
        session.mcp_manager.task_group  # noqa: B018
    with pytest.raises(RuntimeError, match="async with"):
        session.tools  # noqa: B018
    async with session:
        assert session.tools == []
        assert session.mcp_manager.task_group is not None
    with pytest.raises(RuntimeError, match="not running"):
        session.mcp_manager.task_group  # noqa: B018


async def test_a_start_that_fails_closes_what_it_started(tmp_path: Path) -> None:
    session = await create_agent_session(tmp_path, cache=None, extra_config_paths=[tmp_path / "absent.json"])
    with pytest.raises(ConfigError, match=r"absent\.json"):
        async with session:
            pytest.fail("the body must not run when the fleet cannot start")
    with pytest.raises(RuntimeError, match="not running"):
        session.mcp_manager.task_group  # noqa: B018
    await session.aclose()  # closing again is harmless
