"""Many servers at once: the manager and what it is made of (start-up gate, supervision,
re-listing, reload, events) and the persistent tool cache."""
