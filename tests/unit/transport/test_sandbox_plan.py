"""What a sandboxed server's program may read (``transport/sandbox.py``): the installation
above its ``bin/`` folder, a virtual environment and the interpreter it was made from, but
never the home, a folder above it or ``~/.local`` (which holds the user's data too)."""

from __future__ import annotations

from pathlib import Path

from mcpfleet.transport.sandbox import _program_folders


def program(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_a_program_in_an_installations_bin_folder_exposes_that_installation(tmp_path: Path) -> None:
    home = tmp_path / "home"
    node = program(tmp_path / "opt" / "node-22" / "bin" / "node")
    assert _program_folders(node, home) == [tmp_path / "opt" / "node-22"]


def test_a_virtual_environment_exposes_itself_and_the_interpreter_it_was_made_from(tmp_path: Path) -> None:
    home = tmp_path / "home"
    base = tmp_path / "pythons" / "3.11"
    program(base / "bin" / "python3.11")
    venv = tmp_path / "project" / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3.11")
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\nversion = 3.11.7\n")
    assert _program_folders(venv / "bin" / "python", home) == [venv, base]


def test_a_program_in_the_home_or_in_dot_local_exposes_only_itself(tmp_path: Path) -> None:
    home = tmp_path / "home"
    uvx = program(home / ".local" / "bin" / "uvx")
    script = program(home / "bin" / "my-server")
    loose = program(home / "server")
    assert _program_folders(uvx, home) == [uvx]
    assert _program_folders(script, home) == [script]
    assert _program_folders(loose, home) == [loose]


def test_a_program_directly_under_a_folder_above_the_home_exposes_only_itself(tmp_path: Path) -> None:
    home = tmp_path / "users" / "me"
    home.mkdir(parents=True)
    tool = program(tmp_path / "users" / "bin" / "tool")
    assert _program_folders(tool, home) == [tool]
