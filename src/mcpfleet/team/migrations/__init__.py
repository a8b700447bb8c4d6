"""The state store's schema, one SQL file per version and dialect (``sqlite/``, ``postgres/``).

A file is named ``NNNN_what.sql``; its number is the schema version it brings. Files are never
edited once released: a change of schema is a new file (``team.schema`` applies them in order
and records each in ``schema_migrations``).
"""
