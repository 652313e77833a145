-- Queries of the conversation store (migration 0004): content-addressed messages and summaries.
-- Every statement filters on user_id (DESIGN §7). Names resolve in the tenant schema (search_path).

-- name: remember_messages
-- Store messages once per user, keyed by invariant hash; the ones already stored are left as they are.
INSERT INTO messages (user_id, invariant, role, message)
SELECT $1, m.invariant, m.role, m.message
FROM unnest($2::text[], $3::text[], $4::jsonb[]) AS m (invariant, role, message)
ON CONFLICT (user_id, invariant) DO NOTHING;

-- name: messages_by_hash
SELECT invariant, message
FROM messages
WHERE user_id = $1 AND invariant = ANY($2::text[]);

-- name: best_summary
-- The summary of user $1 that covers the most turns of the branch whose turn hashes are $2, in order,
-- sent as ONE text, the hashes joined by commas (a text[] parameter of 500 hashes costs about 0.3 ms
-- more to send and decode); the lookup itself is best_branch_summary (migration 0009).
SELECT * FROM best_branch_summary($1, string_to_array($2::text, ','));

-- name: inlet_lookup
-- The inlet's one statement: best_summary of user $1 for the branch $2 (joined hashes, as there), and
-- the summary failure of chat $3 not shown yet (migration 0007), taken as it is read so that it is
-- shown once ($3 = '' matches no row). Always one row; its summary columns are NULL when none is valid.
WITH failure AS (
    DELETE FROM summary_failures WHERE user_id = $1 AND chat_id = $3
    RETURNING reason, detail, failures
)
SELECT best.*, failure.reason AS failure_reason, failure.detail AS failure_detail,
       failure.failures AS failure_count
FROM (SELECT 1) AS one
LEFT JOIN LATERAL best_branch_summary($1, string_to_array($2::text, ',')) AS best ON true
LEFT JOIN failure ON true;

-- name: record_summary_failure
-- A summary job of chat $2 gave up: the latest failure is kept, the count of failures since the
-- chat's last inlet grows.
INSERT INTO summary_failures (user_id, chat_id, reason, detail)
VALUES ($1, $2, $3, $4)
ON CONFLICT (user_id, chat_id) DO UPDATE
SET reason = EXCLUDED.reason, detail = EXCLUDED.detail, failures = summary_failures.failures + 1,
    failed_at = now();

-- name: clear_summary_failure
DELETE FROM summary_failures WHERE user_id = $1 AND chat_id = $2;

-- name: forget_summary_failures
DELETE FROM summary_failures WHERE user_id = $1;

-- name: summaries_at
-- Which of the branch points $2 already have a summary of user $1 (keys and counts, no text).
SELECT covered_hash, covered_count
FROM summaries
WHERE user_id = $1 AND covered_hash = ANY($2::text[]);

-- name: summary_at
SELECT id, covered_hash, covered_count, head_count, text, locale, model, provider, refs,
       extract(epoch FROM created_at)::float8 AS created_at
FROM summaries
WHERE user_id = $1 AND covered_hash = $2;

-- name: save_summary
-- One summary per branch point: a second save of the same point (a replayed job) changes nothing.
INSERT INTO summaries (user_id, covered_hash, covered_count, head_count, text, locale, model, provider,
                       refs, input_tokens, summary_tokens)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (user_id, covered_hash) DO NOTHING
RETURNING id;

-- name: lock_summaries
-- One summary job per chat branch at a time, across workers and processes (echo.capabilities.compression.summary): a
-- session advisory lock on (tenant schema, user, scope), waited for. Advisory locks are database-wide,
-- hence the schema in the key.
SELECT pg_advisory_lock(hashtextextended('echo.summary:' || $1::text || ':' || $2::text || ':' || $3::text, 0));

-- name: unlock_summaries
SELECT pg_advisory_unlock(hashtextextended('echo.summary:' || $1::text || ':' || $2::text || ':' || $3::text, 0));

-- name: forget_summaries
DELETE FROM summaries WHERE user_id = $1;

-- name: forget_messages
DELETE FROM messages WHERE user_id = $1;

-- name: record_head
-- The latest branch of chat $2 of user $1 (migration 0005): its turns' invariant hashes in order, and
-- the cumulative hash of the last one. Written by echo_compression's outlet on every completed turn;
-- an unchanged head is not rewritten (a replayed outlet touches nothing).
INSERT INTO chat_heads (user_id, chat_id, invariants, head_hash, turns)
VALUES ($1, $2, $3::text[], $4, cardinality($3::text[]))
ON CONFLICT (user_id, chat_id) DO UPDATE
SET invariants = EXCLUDED.invariants, head_hash = EXCLUDED.head_hash, turns = EXCLUDED.turns,
    updated_at = now()
WHERE chat_heads.head_hash IS DISTINCT FROM EXCLUDED.head_hash;

-- name: outlet_statement
-- The outlet's one statement: store the new messages of user $1 ($2, $3, $4 as remember_messages;
-- empty arrays store nothing), record chat $5's head ($6, $7 as record_head; chat '' records none),
-- and answer best_summary for the branch $8 (joined hashes; '' looks nothing up). One round trip, one
-- commit.
WITH remembered AS (
    INSERT INTO messages (user_id, invariant, role, message)
    SELECT $1, m.invariant, m.role, m.message
    FROM unnest($2::text[], $3::text[], $4::jsonb[]) AS m (invariant, role, message)
    ON CONFLICT (user_id, invariant) DO NOTHING
),
head AS (
    INSERT INTO chat_heads (user_id, chat_id, invariants, head_hash, turns)
    SELECT $1, $5, $6::text[], $7, cardinality($6::text[])
    WHERE $5 <> ''
    ON CONFLICT (user_id, chat_id) DO UPDATE
    SET invariants = EXCLUDED.invariants, head_hash = EXCLUDED.head_hash, turns = EXCLUDED.turns,
        updated_at = now()
    WHERE chat_heads.head_hash IS DISTINCT FROM EXCLUDED.head_hash
)
SELECT * FROM best_branch_summary($1, string_to_array($8::text, ','));

-- name: latest_branch
SELECT invariants
FROM chat_heads
WHERE user_id = $1 AND chat_id = $2;

-- name: forget_heads
DELETE FROM chat_heads WHERE user_id = $1;
