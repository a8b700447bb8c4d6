"""What every side of mcpfleet agrees on, in the standard library only: the daemon's wire, the defaults, exit codes, notification names and the command line's options."""
