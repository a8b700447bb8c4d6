"""Test servers (stdio and HTTP) and the fixtures that run them."""
