-- Queries of the job queue. Names resolve in the tenant schema (the pool's search_path).
-- Every update of a running job is fenced by (worker_id, attempts): a worker whose lease expired
-- and was taken over changes nothing.

-- name: enqueue
-- Add a job unless (kind, idempotency_key) exists; no row back means it exists.
INSERT INTO jobs (kind, payload, idempotency_key, traceparent, run_after)
VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
ON CONFLICT (kind, idempotency_key) DO NOTHING
RETURNING id;

-- name: find_by_key
SELECT id FROM jobs WHERE kind = $1 AND idempotency_key = $2;

-- name: claim
-- The oldest ready job of the given kinds (pending and due, or running with an expired lease),
-- locked with SKIP LOCKED so that concurrent claimers take different rows, leased to $1.
WITH candidate AS (
    SELECT id, state AS previous_state, worker_id AS previous_worker
    FROM jobs
    WHERE kind = ANY($2::text[])
      AND ((state = 'pending' AND run_after <= now())
           OR (state = 'running' AND leased_until < now()))
    ORDER BY run_after, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE jobs AS j
SET state = 'running',
    attempts = j.attempts + 1,
    worker_id = $1,
    leased_until = now() + make_interval(secs => $3),
    started_at = now(),
    updated_at = now()
FROM candidate AS c
WHERE j.id = c.id
RETURNING j.id, j.kind, j.payload, j.attempts, j.idempotency_key, j.traceparent, j.last_error,
          j.created_at, c.previous_state, c.previous_worker;

-- name: extend_leases
-- Renew the leases of the jobs ($2 ids, $3 attempts) this worker still holds; returns those renewed.
UPDATE jobs
SET leased_until = now() + make_interval(secs => $4), updated_at = now()
WHERE state = 'running' AND worker_id = $1
  AND (id, attempts) IN (SELECT * FROM unnest($2::bigint[], $3::integer[]))
RETURNING id;

-- name: finish_done
UPDATE jobs
SET state = 'done', leased_until = NULL, finished_at = now(), updated_at = now()
WHERE id = $1 AND worker_id = $2 AND attempts = $3 AND state = 'running'
RETURNING id;

-- name: finish_retry
UPDATE jobs
SET state = 'pending', leased_until = NULL, run_after = now() + make_interval(secs => $4),
    last_error = $5, updated_at = now()
WHERE id = $1 AND worker_id = $2 AND attempts = $3 AND state = 'running'
RETURNING id;

-- name: finish_dead
UPDATE jobs
SET state = 'dead', leased_until = NULL, last_error = $4, finished_at = now(), updated_at = now()
WHERE id = $1 AND worker_id = $2 AND attempts = $3 AND state = 'running'
RETURNING id;

-- name: release
-- Hand running jobs back (graceful shutdown): pending now, the attempt not counted.
UPDATE jobs
SET state = 'pending', attempts = attempts - 1, leased_until = NULL, run_after = now(), updated_at = now()
WHERE state = 'running' AND worker_id = $1
  AND (id, attempts) IN (SELECT * FROM unnest($2::bigint[], $3::integer[]))
RETURNING id;

-- name: next_due
-- Seconds until the next job of these kinds may be claimed (negative: one is ready; NULL: none).
SELECT EXTRACT(EPOCH FROM LEAST(
    (SELECT min(run_after) FROM jobs WHERE state = 'pending' AND kind = ANY($1::text[])),
    (SELECT min(leased_until) FROM jobs WHERE state = 'running' AND kind = ANY($1::text[]))
) - now())::float8;

-- name: counts
-- Pending, running and dead jobs by kind, and how many could be claimed now. Each branch reads
-- one partial index (jobs_ready, jobs_leases, jobs_dead_finished), so the cost follows the live
-- queue and the dead letters, never the done rows (which only the retention sweep reads).
SELECT kind, 'pending' AS state, count(*) AS jobs, count(*) FILTER (WHERE run_after <= now()) AS ready
FROM jobs WHERE state = 'pending' GROUP BY kind
UNION ALL
SELECT kind, 'running', count(*), count(*) FILTER (WHERE leased_until < now())
FROM jobs WHERE state = 'running' GROUP BY kind
UNION ALL
SELECT kind, 'dead', count(*), 0
FROM jobs WHERE state = 'dead' GROUP BY kind;

-- name: try_sweep_lock
-- One retention sweeper per tenant schema at a time: a session advisory lock, not waited for.
SELECT pg_try_advisory_lock(hashtextextended('echo.queue.sweep:' || $1::text, 0));

-- name: sweep_unlock
SELECT pg_advisory_unlock(hashtextextended('echo.queue.sweep:' || $1::text, 0));

-- name: sweep_done
-- Delete up to $2 done jobs finished more than $1 seconds ago, oldest first; returns how many.
WITH doomed AS (
    SELECT id FROM jobs
    WHERE state = 'done' AND finished_at < now() - make_interval(secs => $1)
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM jobs WHERE id IN (SELECT id FROM doomed) RETURNING 1
)
SELECT count(*) FROM deleted;

-- name: sweep_dead
-- The same for dead jobs (kept longer: someone may want to read their error and requeue them).
WITH doomed AS (
    SELECT id FROM jobs
    WHERE state = 'dead' AND finished_at < now() - make_interval(secs => $1)
    ORDER BY finished_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM jobs WHERE id IN (SELECT id FROM doomed) RETURNING 1
)
SELECT count(*) FROM deleted;

-- name: get
SELECT id, kind, state, payload, idempotency_key, traceparent, attempts, run_after, leased_until,
       worker_id, last_error, created_at, updated_at, started_at, finished_at
FROM jobs WHERE id = $1;

-- name: requeue_dead
-- Give a dead job a fresh set of attempts (an operator's decision after fixing the cause).
UPDATE jobs
SET state = 'pending', attempts = 0, run_after = now(), updated_at = now(), finished_at = NULL
WHERE id = $1 AND state = 'dead'
RETURNING id;

-- name: forget_user
-- Forgetting a user (DELETE /users/{id}) drops every job about them, in any state: each job kind's
-- payload names its user in user_id. A running job finds its row gone and writes nothing more.
DELETE FROM jobs WHERE payload ->> 'user_id' = $1;
