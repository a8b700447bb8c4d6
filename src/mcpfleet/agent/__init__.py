"""The agent side: the loader and the session that keep an agent's tools in step with the fleet."""
