"""Policies (``team.policy``): first match wins, no match denies, globs over ``server/name``, and a
denial that names the policy; and the team guard's view of them (``team.guard``)."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpfleet.gateway.guard import Asker, GuardedRequest, GuardRefusal
from mcpfleet.team.guard import TeamGuard
from mcpfleet.team.model import Policy
from mcpfleet.team.policy import applies_to, decide
from mcpfleet.team.principal import PRINCIPAL_SCOPE_KEY, Principal

ALICE = Principal("sub-alice", email="alice@example.com", groups=frozenset({"eng"}))
BOB = Principal("sub-bob", email="bob@example.com", groups=frozenset({"sales"}))
CI = Principal("service:ci", service_account="ci")

CONTRACT_POLICIES = (
    Policy(0, allow=("github/*", "jira/read_*"), groups=("eng",), name="engineers"),
    Policy(1, allow=("*",), users=("alice@example.com",)),
    Policy(2, allow=("time/*",), deny=("*/delete_*",)),
)
"""The three policies of the contract's example (DESIGN.md, "Team mode")."""


def test_the_first_policy_that_applies_decides_even_when_a_later_one_would_allow() -> None:
    # alice is in eng: policy 0 decides, so policy 1's "*" never gets to allow her jira/delete.
    decision = decide(CONTRACT_POLICIES, ALICE, "jira", "delete_issue")
    assert not decision.allowed and decision.policy is CONTRACT_POLICIES[0]
    assert decide(CONTRACT_POLICIES, ALICE, "github", "create_issue").allowed
    assert decide(CONTRACT_POLICIES, ALICE, "jira", "read_issue").allowed


def test_a_policy_without_users_or_groups_applies_to_everyone_and_deny_carves_out_of_allow() -> None:
    assert decide(CONTRACT_POLICIES, BOB, "time", "now").allowed
    assert not decide(CONTRACT_POLICIES, BOB, "time", "delete_zone").allowed
    assert not decide(CONTRACT_POLICIES, BOB, "github", "create_issue").allowed


def test_no_policy_that_applies_means_denied() -> None:
    decision = decide(CONTRACT_POLICIES[:2], BOB, "time", "now")
    assert not decision.allowed and decision.policy is None
    text = decision.denial(BOB)
    assert text is not None and "no policy" in text and "bob@example.com" in text
    assert not decide((), ALICE, "time", "now").allowed


def test_a_denial_names_the_policy_by_index_and_name() -> None:
    text = decide(CONTRACT_POLICIES, ALICE, "jira", "delete_issue").denial(ALICE)
    assert text == "jira/delete_issue denied by policy 0 (engineers) for alice@example.com"
    unnamed = decide(CONTRACT_POLICIES, BOB, "time", "delete_zone").denial(BOB)
    assert unnamed is not None and "denied by policy 2 for bob@example.com" in unnamed
    assert decide(CONTRACT_POLICIES, BOB, "time", "now").denial(BOB) is None


def test_users_match_the_email_else_the_subject_and_a_service_account_by_its_name() -> None:
    by_sub = Principal("sub-carol")
    assert applies_to(Policy(0, allow=("*",), users=("sub-carol",)), by_sub)
    # With an email claim, the email is what users: lists; the subject no longer matches.
    assert not applies_to(Policy(0, allow=("*",), users=("sub-alice",)), ALICE)
    assert applies_to(Policy(0, allow=("*",), users=("ci",)), CI)
    assert not applies_to(Policy(0, allow=("*",), users=("service:ci",)), CI)


def test_users_or_groups_either_suffices() -> None:
    policy = Policy(0, allow=("*",), users=("bob@example.com",), groups=("eng",))
    assert applies_to(policy, ALICE) and applies_to(policy, BOB)
    assert not applies_to(policy, CI)


names = st.text(alphabet="abcdefgh_-.", min_size=1, max_size=12)
globs = st.text(alphabet="abc*?_/", min_size=1, max_size=8)


@given(server=names, name=names, allow=st.lists(globs, max_size=4), deny=st.lists(globs, max_size=4))
def test_a_policy_allows_exactly_what_one_allow_matches_and_no_deny_matches(
    server: str, name: str, allow: list[str], deny: list[str]
) -> None:
    policy = Policy(0, allow=tuple(allow), deny=tuple(deny))
    target = f"{server}/{name}"
    expected = any(fnmatchcase(target, glob) for glob in allow) and not any(
        fnmatchcase(target, glob) for glob in deny
    )
    assert decide((policy,), BOB, server, name).allowed is expected


@given(
    policies=st.lists(
        st.builds(
            lambda index, allow, groups: Policy(index, allow=tuple(allow), groups=groups),
            st.integers(0, 9),
            st.lists(globs, min_size=1, max_size=3),
            st.one_of(st.none(), st.lists(st.sampled_from(["eng", "sales", "ops"]), max_size=2).map(tuple)),
        ),
        max_size=5,
    ),
    server=names,
    name=names,
)
def test_the_deciding_policy_is_the_first_that_applies(
    policies: list[Policy], server: str, name: str
) -> None:
    decision = decide(policies, ALICE, server, name)
    applying = [policy for policy in policies if applies_to(policy, ALICE)]
    assert decision.policy is (applying[0] if applying else None)
    # Whatever the later policies say, they change nothing.
    assert decide([*policies, Policy(99, allow=("*",))], ALICE, server, name).allowed == (
        decision.allowed if applying else True
    )


def test_the_guard_reads_the_principal_from_the_scope_and_refuses_a_request_without_one() -> None:
    guard = TeamGuard(CONTRACT_POLICIES)
    assert guard.viewer({PRINCIPAL_SCOPE_KEY: ALICE}) == ALICE
    with pytest.raises(GuardRefusal, match="signed-in"):
        guard.viewer({})
    with pytest.raises(GuardRefusal):
        guard.viewer(None)


def test_the_guard_refuses_as_the_policies_decide_and_forgets_its_decisions_on_update() -> None:
    guard = TeamGuard(CONTRACT_POLICIES)
    told: list[str] = []
    guard.on_views_changed(lambda: told.append("changed"))
    assert guard.refusal(BOB, "tools", "time", "now") is None
    assert guard.update(CONTRACT_POLICIES) is False and told == []
    assert guard.update((Policy(0, allow=("github/*",), name="only-github"),)) is True
    assert told == ["changed"]
    refusal = guard.refusal(BOB, "tools", "time", "now")
    assert refusal is not None and "denied by policy 0 (only-github)" in refusal


@pytest.mark.anyio
async def test_before_refuses_a_denied_request_with_the_policy_text() -> None:
    guard = TeamGuard(CONTRACT_POLICIES)
    request = GuardedRequest(Asker(BOB), "client", "tools", "github", "create_issue", "github_create_issue")
    permit = await guard.before(request)
    assert permit.refusal is not None and "no policy" not in permit.refusal
    assert "github/create_issue denied by policy 2" in permit.refusal
    allowed = GuardedRequest(Asker(ALICE), "client", "tools", "github", "create_issue", "github_create_issue")
    assert (await guard.before(allowed)).refusal is None
