"""The exit codes of the ``mcpfleet`` command (DESIGN.md "The command line").

The CLI, the console script's ``serve`` route, the shim and the daemon's control answers (an
error's ``exit``) all end with these, so a host or a script reads one meaning whichever
process served the command.
"""

from __future__ import annotations

EXIT_OK = 0
"""Success; ``status``, ``tools`` and ``config`` also whenever they could report."""
EXIT_FAILED = 1
"""The operation failed: a tool error, no such tool, a daemon that cannot be reached again."""
EXIT_USAGE = 2
"""A usage or config error: the command line or a file must change."""
EXIT_INTERRUPTED = 130
"""Ctrl-C: 128 + SIGINT, as a shell reports a program the signal ended."""
