-- Queries of the memory store (migration 0006). Every statement filters on user_id (DESIGN §7).

-- name: lock_user
-- Serialises the short write steps of one user's memories across workers (transaction-scoped):
-- deciding between touch, merge and insert, and writing the vector index. LLM calls happen outside.
SELECT pg_advisory_xact_lock(hashtextextended('echo.domain.memory:' || current_schema() || ':' || $1, 0));

-- name: job_alive
-- DELETE /users/{id} deletes the user's jobs under the user's lock: a job whose row is gone writes nothing.
SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1);

-- name: window_outcome
SELECT outcome, memory, reason FROM memory_windows WHERE user_id = $1 AND window_key = $2;

-- name: record_window
INSERT INTO memory_windows (user_id, window_key, chat_id, outcome, memory, reason)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (user_id, window_key) DO NOTHING
RETURNING window_key;

-- name: insert_memory
INSERT INTO memories (user_id, id, memory_id, summary, importance, tags, chat_id, provenance, provider, model)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (user_id, id) DO NOTHING
RETURNING id;

-- name: get_memory
SELECT id, user_id, memory_id, summary, importance, tags, chat_id, version, indexed_version, provenance,
       extract(epoch FROM created_at)::float8 AS created_at, extract(epoch FROM updated_at)::float8 AS updated_at
FROM memories
WHERE user_id = $1 AND id = $2;

-- name: get_memory_for_update
SELECT id, summary, importance, tags, version
FROM memories
WHERE user_id = $1 AND id = $2 AND version = $3
FOR UPDATE;

-- name: memories_by_ids
SELECT id, user_id, memory_id, summary, importance, tags, chat_id, version, indexed_version, provenance,
       extract(epoch FROM created_at)::float8 AS created_at, extract(epoch FROM updated_at)::float8 AS updated_at
FROM memories
WHERE user_id = $1 AND id = ANY($2::text[]);

-- name: list_memories
SELECT id, user_id, memory_id, summary, importance, tags, chat_id, version, indexed_version, provenance,
       extract(epoch FROM created_at)::float8 AS created_at, extract(epoch FROM updated_at)::float8 AS updated_at
FROM memories
WHERE user_id = $1
ORDER BY updated_at DESC, id
LIMIT $2 OFFSET $3;

-- name: count_memories
SELECT count(*) FROM memories WHERE user_id = $1;

-- name: touch_memory
UPDATE memories
SET updated_at = now(), provenance = provenance || $3::jsonb
WHERE user_id = $1 AND id = $2
RETURNING version;

-- name: save_version
INSERT INTO memory_versions (user_id, memory, version, summary, importance, tags, provenance, replaced_by)
SELECT user_id, id, version, summary, importance, tags, provenance, $3
FROM memories
WHERE user_id = $1 AND id = $2
ON CONFLICT (user_id, memory, version) DO NOTHING;

-- name: merge_memory
UPDATE memories
SET summary = $4, importance = $5, tags = $6, provenance = provenance || $7::jsonb,
    version = version + 1, updated_at = now()
WHERE user_id = $1 AND id = $2 AND version = $3
RETURNING version;

-- name: mark_indexed
UPDATE memories SET indexed_version = $3
WHERE user_id = $1 AND id = $2 AND indexed_version < $3;

-- name: versions
SELECT version, summary, importance, tags, replaced_by, extract(epoch FROM replaced_at)::float8 AS replaced_at
FROM memory_versions
WHERE user_id = $1 AND memory = $2
ORDER BY version;

-- name: delete_memory
DELETE FROM memories WHERE user_id = $1 AND id = $2 RETURNING id;

-- name: forget_memories
DELETE FROM memories WHERE user_id = $1;

-- name: forget_windows
DELETE FROM memory_windows WHERE user_id = $1;
