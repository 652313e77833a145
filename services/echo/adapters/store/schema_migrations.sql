-- Queries of the migration runner. Names are resolved in the tenant schema (the pool's search_path).

-- name: lock
-- One migrator per schema at a time, across processes: a session advisory lock on the schema name.
SELECT pg_advisory_lock(hashtextextended('echo.migrations:' || $1::text, 0));

-- name: unlock
SELECT pg_advisory_unlock(hashtextextended('echo.migrations:' || $1::text, 0));

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema};

-- name: create_schema_migrations
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: applied_migrations
SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version;

-- name: record_migration
INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3);

-- name: schema_exists
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1);
