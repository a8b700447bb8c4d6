"""Fixtures of the discovery tests: a project folder, the isolated home, a file writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.unit.config.config_helpers import WriteFile


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root.resolve()


@pytest.fixture
def home(isolated_home: Path) -> Path:
    return isolated_home


@pytest.fixture
def write() -> WriteFile:
    """Write ``content`` (text as is, anything else as JSON) to ``path``, creating folders."""

    def write_file(path: Path, content: Any) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
        return path

    return write_file
