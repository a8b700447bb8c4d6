"""The gateway and the daemon's serving of it import nothing of the rooms above them.

Both used to build a gateway with the CLI's help (``cli.serve_commands.tool_budget``); the one
assembly (``gateway.assembly.open_gateway``) lives in the gateway now. Read from the source,
imports inside functions included, since those are where a back-import hides.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mcpfleet

SOURCE = Path(mcpfleet.__file__).parent
ABOVE_THE_GATEWAY = ("mcpfleet.cli", "mcpfleet.agent", "mcpfleet.hosts", "mcpfleet.integrations")


def imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            modules.add(node.module)
    return modules


@pytest.mark.parametrize(
    "path",
    [*sorted((SOURCE / "gateway").glob("*.py")), SOURCE / "daemon" / "service.py"],
    ids=lambda path: f"{path.parent.name}/{path.name}",
)
def test_the_gateway_and_the_daemon_service_import_nothing_above_the_gateway(path: Path) -> None:
    above = sorted(
        module
        for module in imported_modules(path)
        if any(module == room or module.startswith(f"{room}.") for room in ABOVE_THE_GATEWAY)
    )
    assert above == [], f"{path.relative_to(SOURCE)} imports {above}"
