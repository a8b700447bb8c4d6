"""Team mode (B16): one gateway for an organisation, served over HTTP to signed-in users.

``mcpfleet serve --http HOST:PORT --team FILE``. The rooms of this package:

- ``model``: the team file as typed records (``TeamFile``) — what every other module reads;
- ``principal``: who is asking (``Principal``), put in the ASGI scope by the identity check;
- ``state``: the durable state behind one small interface (``TeamState``), SQLite by default
  and PostgreSQL when ``state.postgres`` is set: audit records and per-user credentials.

It sits above the gateway (which knows nothing of users: the team side hands it a per-request
view) and below the command line. Its third-party dependencies are the extra ``mcpfleet[team]``;
nothing here is imported unless ``--team`` is given.
"""
