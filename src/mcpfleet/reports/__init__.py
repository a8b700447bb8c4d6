"""The reports of ``status``, ``tools`` and ``call``: built once, on any fleet, by the command
line in its own process and by the daemon on a session's view, so both print the same bytes."""
