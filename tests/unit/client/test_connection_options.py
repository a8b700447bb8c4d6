"""``ConnectionOptions``: the one record a connection is opened with, and its keyword front."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcpfleet.client.options import ConnectionOptions, connection_options


def test_keywords_alone_build_the_record(tmp_path: Path) -> None:
    options = connection_options(None, {"cwd": tmp_path, "timeout_ms": 400})
    assert options == ConnectionOptions(cwd=tmp_path, timeout_ms=400)
    assert options.resolve_secrets is True
    assert options.roots == "working-folder"
    assert options.probe_bound_ms == 1000


def test_keywords_replace_those_fields_of_a_record_and_leave_it_unchanged(tmp_path: Path) -> None:
    base = ConnectionOptions(cwd=tmp_path, log_level="debug", probe_timeout_ms=200)
    options = connection_options(base, {"era": None, "timeout_ms": 0})
    assert (options.cwd, options.log_level, options.probe_bound_ms, options.timeout_ms) == (
        tmp_path,
        "debug",
        200,
        0,
    )
    assert base.timeout_ms is None
    assert connection_options(base, {}) is base


def test_an_unknown_keyword_names_itself() -> None:
    with pytest.raises(TypeError, match="timeout"):
        connection_options(None, {"cwd": Path("."), "timeout": 5})


def test_without_a_folder_there_is_no_record() -> None:
    with pytest.raises(TypeError, match="cwd"):
        connection_options(None, {"timeout_ms": 5})
