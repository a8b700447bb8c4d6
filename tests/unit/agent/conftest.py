"""Every test here runs with a private daemon runtime folder of its own (``tests.daemon_runtime``)."""

from tests.daemon_runtime import runtime_dir as runtime_dir
