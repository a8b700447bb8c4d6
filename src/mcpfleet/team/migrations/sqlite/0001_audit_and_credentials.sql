-- Version 1: audit records and per-user upstream credentials.
-- Times are microseconds since the Unix epoch, UTC: integers order and compare exactly.

CREATE TABLE audit_records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time_us INTEGER NOT NULL,
    user_subject TEXT NOT NULL,
    client TEXT,
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'denied')),
    duration_ms REAL NOT NULL,
    arguments_digest TEXT NOT NULL,
    -- The arguments as JSON text, only when the team file says audit: {arguments: true}.
    arguments TEXT
);

CREATE INDEX audit_records_by_time ON audit_records (time_us, id);
CREATE INDEX audit_records_by_user ON audit_records (user_subject, time_us, id);

-- Sealed (encrypted) before they arrive: this table never holds a token in clear.
CREATE TABLE credentials (
    user_subject TEXT NOT NULL,
    server TEXT NOT NULL,
    sealed BLOB NOT NULL,
    updated_at_us INTEGER NOT NULL,
    PRIMARY KEY (user_subject, server)
);
