"""``team.grouped_writes``: writers that arrive while a commit runs share the next one; each
returns once the commit holding its item is done, or raises that commit's error (its own copy);
a writer whose caller gives up still leaves its group written and answered."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from mcpfleet.team.grouped_writes import GroupedWrites
from mcpfleet.team.state import TeamStateError

pytestmark = pytest.mark.anyio


class Store:
    """Commits groups of items; ``gate`` holds each commit until the test lets it go."""

    def __init__(self) -> None:
        self.groups: list[list[int]] = []
        self.gate = anyio.Event()
        self.committing = anyio.Event()
        self.fail_with: Exception | None = None

    async def commit(self, items: Sequence[int]) -> None:
        self.committing.set()
        await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        self.groups.append(list(items))


async def test_writers_arriving_during_a_commit_share_the_next_one() -> None:
    store = Store()
    writes = GroupedWrites(store.commit)
    returned: list[int] = []

    async def write(item: int) -> None:
        await writes.write(item)
        returned.append(item)

    async with anyio.create_task_group() as group:
        group.start_soon(write, 0)
        await store.committing.wait()  # the first writer's commit runs, alone
        for item in range(1, 6):
            group.start_soon(write, item)
        await anyio.wait_all_tasks_blocked()
        assert returned == [], "nobody returns before the commit holding its item"
        store.gate.set()
    assert store.groups == [[0], [1, 2, 3, 4, 5]]
    assert sorted(returned) == [0, 1, 2, 3, 4, 5]


async def test_every_writer_of_a_failed_group_raises_an_error_of_its_own() -> None:
    store = Store()
    store.fail_with = TeamStateError("the team state (SQLite, x): writing failed: disk I/O error")
    writes = GroupedWrites(store.commit)
    errors: list[BaseException] = []

    async def write(item: int) -> None:
        try:
            await writes.write(item)
        except TeamStateError as error:
            errors.append(error)

    async with anyio.create_task_group() as group:
        for item in range(3):
            group.start_soon(write, item)
        await anyio.wait_all_tasks_blocked()
        store.gate.set()
    assert len(errors) == 3 and len({id(error) for error in errors}) == 3
    assert all("disk I/O error" in str(error) for error in errors)
    store.fail_with = None
    await writes.write(9)  # the next group is written as ever
    assert store.groups == [[9]]


async def test_a_writer_given_up_on_still_writes_its_group_and_answers_the_others() -> None:
    store = Store()
    writes = GroupedWrites(store.commit)
    answered = anyio.Event()
    leader_scope = anyio.CancelScope()

    async def leader() -> None:
        with leader_scope:
            await writes.write(1)

    async def follower() -> None:
        await writes.write(2)
        answered.set()

    async with anyio.create_task_group() as group:
        group.start_soon(leader)
        await store.committing.wait()  # the leader's commit is under way
        group.start_soon(follower)
        await anyio.wait_all_tasks_blocked()
        leader_scope.cancel()  # its caller gives up: the commit goes on all the same
        await anyio.wait_all_tasks_blocked()
        store.gate.set()
        with anyio.fail_after(10):
            await answered.wait()
    assert store.groups == [[1], [2]]
    assert leader_scope.cancelled_caught, "the leader's caller got its cancellation, once written"
