"""Which discovery filters a fleet applies travel as data in its ``FleetSpec``: the client's
side names them (the agent's Exa filter, for a CLI command or an agent session), the daemon
checks the names and applies them through ``config.entry_filters``."""

from __future__ import annotations

import pytest

from mcpfleet.contract import wire


def test_the_filters_a_spec_names_come_back_from_its_json() -> None:
    spec = wire.FleetSpec(cwd="/work/project", entry_filters=(wire.EXA_ENTRY_FILTER,))
    assert spec.to_json()["entry_filters"] == ["exa"]
    assert wire.FleetSpec.from_json(spec.to_json()) == spec


def test_a_spec_without_filters_names_none() -> None:
    # What a host's session sends (the shim's spec), and what an older client's JSON means.
    assert wire.FleetSpec.from_json({"cwd": "/work/project"}).entry_filters == ()
    assert "entry_filters" not in wire.FleetSpec(cwd="/work/project").to_json()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("exa", '"fleet.entry_filters" must be a list of strings, got str'),
        (["exa", 3], '"fleet.entry_filters" must be a list of strings, got list'),
        (["exa", "rm -rf"], "\"fleet.entry_filters\" names no known filter 'rm -rf' (known: exa)"),
    ],
)
def test_a_filter_list_that_is_not_known_names_is_refused_with_what_is_known(
    raw: object, message: str
) -> None:
    with pytest.raises(wire.WireError) as caught:
        wire.FleetSpec.from_json({"cwd": "/work/project", "entry_filters": raw})
    assert str(caught.value) == message
