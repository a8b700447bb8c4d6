"""OAuth for HTTP servers, one module per part: ``settings`` (the config's ``oauth`` block,
validated, SDK-free), ``storage`` (the token files), ``loopback`` (the login's redirect
target), ``provider`` (the SDK's provider with mcpfleet's policy; ``oauth_auth_for`` is the
entry), ``grants`` (the two grants that need no person), ``login`` (``login`` / ``logout``).

``auth`` may import ``client`` (the SDK accessors of ``client._sdk``, and the login's
connection check through ``client.opening``); ``client`` never imports ``auth``: a connection
receives its ``httpx2.Auth`` ready-made. Nothing here imports ``fleet``, ``agent`` or ``cli``.
"""
