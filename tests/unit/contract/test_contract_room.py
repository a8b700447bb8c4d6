"""The contract room stays at the bottom: each of its modules, imported alone in a fresh
interpreter, loads the standard library, the contract and the error tree (``mcpfleet.errors``, the
one room below it, so the wire's errors are mcpfleet errors too), nothing else of mcpfleet and
nothing installed."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import mcpfleet.contract

CONTRACT_MODULES = sorted(
    ["mcpfleet.contract"]
    + [f"mcpfleet.contract.{module.name}" for module in pkgutil.iter_modules(mcpfleet.contract.__path__)]
)


def modules_after(statement: str) -> set[str]:
    """Every module a fresh isolated interpreter (``-I``: no PYTHONPATH, no user site, not the
    current folder) holds after running ``statement``."""
    probe = f"import sys; {statement}; sys.stdout.write(' '.join(sys.modules))"
    completed = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    return set(completed.stdout.split())


@pytest.fixture(scope="module")
def at_start() -> set[str]:
    """What the interpreter loads before any statement (site hooks of the environment included)."""
    return modules_after("pass")


def is_standard_library(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names


def test_the_room_has_the_agreed_modules() -> None:
    # The room may grow (the daemon's wire moves here), never lose one of these.
    assert {
        "mcpfleet.contract.defaults",
        "mcpfleet.contract.environment",
        "mcpfleet.contract.exit_codes",
        "mcpfleet.contract.notifications",
        "mcpfleet.contract.options",
        "mcpfleet.contract.text",
    } <= set(CONTRACT_MODULES)


BELOW_THE_CONTRACT = {"mcpfleet", "mcpfleet.errors"}


@pytest.mark.parametrize("module", CONTRACT_MODULES)
def test_a_contract_module_loads_only_the_standard_library_and_the_contract(
    module: str, at_start: set[str]
) -> None:
    loaded = modules_after(f"import {module}") - at_start
    assert module in loaded
    outside = sorted(
        name
        for name in loaded
        if not is_standard_library(name)
        and name not in BELOW_THE_CONTRACT
        and not name.startswith("mcpfleet.contract")
    )
    assert outside == []


def test_the_option_table_is_read_without_argparse(at_start: set[str]) -> None:
    """Discovery reads the table (which words of a host's entry are options): reading it must
    not load the parser."""
    loaded = modules_after("from mcpfleet.contract.options import GLOBAL_OPTIONS, long_flags") - at_start
    assert "mcpfleet.contract.options" in loaded
    assert "argparse" not in loaded


def test_the_shim_says_a_hostile_line_safely_without_loading_the_cli() -> None:
    """The shim's one use of terminal-safe text (a line on stderr quoting the daemon) takes it
    from the contract: saying it loads no module of the CLI."""
    probe = (
        "import sys; from mcpfleet.daemon_client import shim; "
        "shim._say('refused: \\x1b]0;owned\\x07 done'); "
        "print(sorted(name for name in sys.modules if name.startswith('mcpfleet.cli')))"
    )
    completed = subprocess.run(
        [sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert completed.stdout.strip() == "[]"
    assert completed.stderr == "mcpfleet: refused: \\x1b]0;owned\\x07 done\n"
