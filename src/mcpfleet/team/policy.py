"""Who may use what: the team file's ``policies``, decided for one principal and one
``server/name`` (a tool, a prompt, or a resource by its URI).

- The policies are read in order; the **first whose ``users``/``groups`` match the principal
  decides**, and none after it is consulted. A policy with neither matches everyone; with
  ``users``, the principal's ``policy_name`` (a service account's NAME, else the token's
  ``email``, else its ``sub``; compared exactly) must be listed; with ``groups``, one of the
  principal's groups must be; with both, either suffices.
- That policy allows ``server/name`` when one of its ``allow`` globs matches it and none of
  its ``deny`` globs does. Globs are shell-style (``*``, ``?``, ``[…]``), case-sensitive, and
  ``*`` crosses ``/`` (``github/*`` covers every tool of ``github``; ``*/delete_*`` every
  ``delete_`` tool; a resource is matched by its URI, so ``docs/*`` covers each of its URIs).
- **No policy matches: denied.**

A denial's text contains ``denied by policy N`` (its index, from 0) and its ``name`` when it
has one, so the person refused can tell their admin which rule to look at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from mcpfleet.team.model import Policy
from mcpfleet.team.principal import Principal


@dataclass(frozen=True, slots=True)
class Decision:
    """What the policies say about one principal and one ``server/name``."""

    allowed: bool
    policy: Policy | None
    """The policy that decided; ``None`` when none matched the principal (denied)."""
    target: str
    """``server/name`` as it was matched."""

    def denial(self, principal: Principal) -> str | None:
        """The text of the refusal (``None`` when allowed)."""
        if self.allowed:
            return None
        who = principal.policy_name
        policy = self.policy
        if policy is None:
            return (
                f"{self.target} denied: no policy of the team file applies to {who}; "
                "ask the gateway's admin to add one (users or groups) that allows it"
            )
        named = f" ({policy.name})" if policy.name else ""
        return f"{self.target} denied by policy {policy.index}{named} for {who}"


def applies_to(policy: Policy, principal: Principal) -> bool:
    """Whether ``policy`` speaks for ``principal`` (see the module)."""
    if policy.users is None and policy.groups is None:
        return True
    if policy.users is not None and principal.policy_name in policy.users:
        return True
    return policy.groups is not None and not principal.groups.isdisjoint(policy.groups)


def permits(policy: Policy, target: str) -> bool:
    """Whether ``policy`` allows ``target`` (``server/name``)."""
    if not any(fnmatchcase(target, glob) for glob in policy.allow):
        return False
    return not any(fnmatchcase(target, glob) for glob in policy.deny)


def decide(policies: Sequence[Policy], principal: Principal, server: str, name: str) -> Decision:
    """The first policy that applies to ``principal`` decides; none applies: denied."""
    target = f"{server}/{name}"
    for policy in policies:
        if applies_to(policy, principal):
            return Decision(permits(policy, target), policy, target)
    return Decision(False, None, target)
