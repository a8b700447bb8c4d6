"""The fleet's web dashboard (``mcpfleet ui``, docs/ui.md): pages over a ``FleetSource``.

access (the one-time login link, the session cookie, CSRF, the Host and Origin checks),
app (the pages and actions), live (their live parts as server-sent events), forms (the
playground's form from a tool's input schema), charts (the plots, SVG drawn by pygal),
source (what the pages need of a fleet, which its owner implements: ``daemon.dashboard``)
and server (uvicorn on a loopback port). Templates and static files ship in the package.
"""
