-- Queries of the rich shadow (migration 0010). Every statement filters on user_id (DESIGN §7).

-- name: stored_points
-- The points of user $1 among the cumulative hashes $2 that have a rich form, each with its
-- signatures (in part order) and its tool journal (in call order), in one statement.
SELECT s.cumulative_hash, s.role, s.rich, s.refs,
       sig.content_indexes, sig.part_indexes, sig.signatures, journal.calls
FROM suture_index AS s
LEFT JOIN LATERAL (
    SELECT array_agg(c.content_index ORDER BY c.content_index, c.part_index) AS content_indexes,
           array_agg(c.part_index ORDER BY c.content_index, c.part_index) AS part_indexes,
           array_agg(c.signature ORDER BY c.content_index, c.part_index) AS signatures
    FROM cognitive_signatures AS c
    WHERE c.user_id = s.user_id AND c.cumulative_hash = s.cumulative_hash
) AS sig ON true
LEFT JOIN LATERAL (
    SELECT json_agg(
               json_build_object(
                   'call_index', t.call_index, 'call_id', t.call_id, 'name', t.name,
                   'arguments', t.arguments, 'response', t.response, 'executor', t.executor
               ) ORDER BY t.call_index
           ) AS calls
    FROM tool_journal AS t
    WHERE t.user_id = s.user_id AND t.cumulative_hash = s.cumulative_hash
) AS journal ON true
WHERE s.user_id = $1 AND s.cumulative_hash = ANY($2::text[]) AND s.rich IS NOT NULL;

-- name: payloads
SELECT payload_hash, kind, mime_type, data
FROM rich_payloads
WHERE user_id = $1 AND payload_hash = ANY($2::text[]);

-- name: record_point
-- One point of user $1 with its rich form, payloads, signatures and tool journal, in one statement.
-- A point already stored keeps what it has (the same hash is the same message at the same place),
-- except that an index row without a rich form gets one. Payloads already stored are not written
-- again. Answers whether the point was written (new, or given its rich form) and how many payload
-- rows were new.
WITH point AS (
    INSERT INTO suture_index
        (user_id, cumulative_hash, position, parent_hash, invariant_hash, chat_id, role, rich, refs, model)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8::json, $9::text[], $10)
    ON CONFLICT (user_id, cumulative_hash) DO UPDATE
    SET rich = EXCLUDED.rich, refs = EXCLUDED.refs
    WHERE suture_index.rich IS NULL AND EXCLUDED.rich IS NOT NULL
    RETURNING cumulative_hash
), payloads AS (
    INSERT INTO rich_payloads (user_id, payload_hash, kind, mime_type, data)
    SELECT $1, p.payload_hash, p.kind, p.mime_type, p.data
    FROM unnest($11::text[], $12::text[], $13::text[], $14::bytea[]) AS p (payload_hash, kind, mime_type, data)
    ON CONFLICT (user_id, payload_hash) DO NOTHING
    RETURNING 1
), signatures AS (
    INSERT INTO cognitive_signatures (user_id, cumulative_hash, content_index, part_index, signature)
    SELECT $1, point.cumulative_hash, s.content_index, s.part_index, s.signature
    FROM point, unnest($15::integer[], $16::integer[], $17::bytea[]) AS s (content_index, part_index, signature)
    ON CONFLICT (user_id, cumulative_hash, content_index, part_index) DO NOTHING
), journal AS (
    INSERT INTO tool_journal
        (user_id, cumulative_hash, call_index, call_id, name, arguments, response, executor)
    SELECT $1, point.cumulative_hash, t.call_index, t.call_id, t.name, t.arguments, t.response, t.executor
    FROM point,
         unnest($18::integer[], $19::text[], $20::text[], $21::json[], $22::json[], $23::text[])
             AS t (call_index, call_id, name, arguments, response, executor)
    ON CONFLICT (user_id, cumulative_hash, call_index) DO NOTHING
)
SELECT (SELECT count(*) FROM point) AS new_point, (SELECT count(*) FROM payloads) AS new_payloads,
       -- Commit without waiting for the WAL flush (about 2 ms a write here): the shadow is an
       -- enhancement, and a server crash can only lose its last writes (never corrupt them), which
       -- the pipe survives by converting those messages plainly. Local to this statement's transaction.
       set_config('synchronous_commit', 'off', true) AS commit_mode;

-- name: forget_points
DELETE FROM suture_index WHERE user_id = $1;

-- name: forget_payloads
DELETE FROM rich_payloads WHERE user_id = $1;

-- name: forget_signatures
DELETE FROM cognitive_signatures WHERE user_id = $1;

-- name: forget_journal
DELETE FROM tool_journal WHERE user_id = $1;
