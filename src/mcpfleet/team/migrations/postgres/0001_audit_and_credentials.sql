-- Version 1: audit records and per-user upstream credentials.

CREATE TABLE audit_records (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time TIMESTAMPTZ NOT NULL,
    user_subject TEXT NOT NULL,
    client TEXT,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'denied')),
    duration_ms DOUBLE PRECISION NOT NULL,
    arguments_digest TEXT NOT NULL,
    -- The arguments as JSON text (not jsonb: that refuses a \u0000 a client may send), only when
    -- the team file says audit: {arguments: true}.
    arguments TEXT
);

CREATE INDEX audit_records_by_time ON audit_records (time, id);
CREATE INDEX audit_records_by_user ON audit_records (user_subject, time, id);

-- Sealed (encrypted) before they arrive: this table never holds a token in clear.
CREATE TABLE credentials (
    user_subject TEXT NOT NULL,
    server TEXT NOT NULL,
    sealed BYTEA NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (user_subject, server)
);
