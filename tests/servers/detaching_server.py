"""The fake server (``fake_server.py``, same flags), whose descendants leave its process group.

``--detached-pid-file PATH`` (required, first) starts, before serving, two sleepers that
each append their pid to PATH:

* one started in a session of its own (``setsid()``), with its stdio on /dev/null;
* one double-forked the way daemons detach (fork, ``setsid()``, fork, the middle process
  exits), keeping the server's stdin, stdout and stderr open, as careless daemons do.

Neither is in the server's process group; the second is not even its descendant any more
(it is reparented to init). Both inherit the server's environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tests.servers.fake_server import main as serve_fake
else:
    # Run as a script, this file's folder is the first entry of sys.path.
    from fake_server import main as serve_fake

SLEEPER = "import os, sys, time; open(sys.argv[1], 'a').write(f'{os.getpid()}\\n'); time.sleep(300)"
STARTED_WITHIN_S = 10.0


def start_detached_sleepers(pid_file: str) -> None:
    subprocess.Popen(
        [sys.executable, "-c", SLEEPER, pid_file],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    middle = os.fork()
    if middle == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", SLEEPER, pid_file])
        os._exit(0)
    os.waitpid(middle, 0)
    deadline = time.monotonic() + STARTED_WITHIN_S
    while time.monotonic() < deadline:
        if os.path.exists(pid_file) and len(Path(pid_file).read_text().split()) >= 2:
            return
        time.sleep(0.01)


if __name__ == "__main__":
    if sys.argv[1:2] != ["--detached-pid-file"] or len(sys.argv) < 3:
        sys.exit("usage: detaching_server.py --detached-pid-file PATH [fake_server.py flags]")
    start_detached_sleepers(sys.argv[2])
    serve_fake(sys.argv[3:])
