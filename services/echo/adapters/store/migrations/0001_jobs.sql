-- The job queue (DESIGN §5): every slow step is a row here until a worker finishes it.
-- States: pending -> running -> done | dead; running -> pending on retry, lease expiry or release.
CREATE TABLE jobs (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            text NOT NULL CHECK (kind ~ '^[a-z][a-z0-9_]{0,62}$'),
    state           text NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'running', 'done', 'dead')),
    payload         jsonb NOT NULL DEFAULT '{}'::jsonb,
    idempotency_key text,
    traceparent     text,
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    run_after       timestamptz NOT NULL DEFAULT now(),
    leased_until    timestamptz,
    worker_id       text,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    started_at      timestamptz,
    finished_at     timestamptz,
    CONSTRAINT jobs_lease_iff_running
        CHECK ((state = 'running') = (leased_until IS NOT NULL AND worker_id IS NOT NULL)),
    -- A second enqueue with the same (kind, key) returns the first job instead of adding one.
    CONSTRAINT jobs_idempotency UNIQUE (kind, idempotency_key)
);

-- Claim: the oldest ready job of the kinds a worker has room for.
CREATE INDEX jobs_ready ON jobs (kind, run_after, id) WHERE state = 'pending';
-- Re-delivery: running jobs whose lease has expired.
CREATE INDEX jobs_leases ON jobs (kind, leased_until) WHERE state = 'running';
