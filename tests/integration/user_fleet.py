"""The user-level fleet the CLI tests write: mcpfleet's own user config, holding fake servers."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import PYTHON
from tests.servers.fixtures import FAKE_SERVER

from mcpfleet.paths import user_config_file


def write_user_config(servers: dict[str, dict[str, Any]]) -> None:
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))


def fake_entry(name: str, *flags: str) -> dict[str, Any]:
    return {"command": PYTHON, "args": [str(FAKE_SERVER), "--name", name, *flags]}
