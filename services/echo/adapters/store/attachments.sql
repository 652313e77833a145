-- Queries of the chat file registry (migration 0011). Every statement filters on user_id (DESIGN §7).

-- name: by_file
SELECT source_id, chat_id, file_id, filename, mime_type, mode, status, content_sha256, size_bytes, summary, summary_mode, chunks, error, extract(epoch FROM created_at)::float8 AS created_at FROM attachments WHERE user_id = $1 AND chat_id = $2 AND file_id = $3
ORDER BY created_at LIMIT 1;

-- name: by_content
SELECT source_id, chat_id, file_id, filename, mime_type, mode, status, content_sha256, size_bytes, summary, summary_mode, chunks, error, extract(epoch FROM created_at)::float8 AS created_at FROM attachments WHERE user_id = $1 AND chat_id = $2 AND content_sha256 = $3;

-- name: get
SELECT source_id, chat_id, file_id, filename, mime_type, mode, status, content_sha256, size_bytes, summary, summary_mode, chunks, error, extract(epoch FROM created_at)::float8 AS created_at FROM attachments WHERE user_id = $1 AND source_id = $2;

-- name: of_chat
-- The chat's files for the AEC block's registre_fichiers, oldest first, bounded.
SELECT source_id, chat_id, file_id, filename, mime_type, mode, status, content_sha256, size_bytes, summary, summary_mode, chunks, error, extract(epoch FROM created_at)::float8 AS created_at FROM attachments WHERE user_id = $1 AND chat_id = $2 ORDER BY created_at, source_id LIMIT $3;

-- name: insert
-- Nothing when the source id is taken (two files in one second: the caller takes the next second)
-- or the content is registered in the chat already (the caller reads that row).
INSERT INTO attachments (user_id, source_id, chat_id, file_id, filename, mime_type, mode, status,
                         content_sha256, size_bytes, pending_text, summary, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now() + make_interval(secs => $13))
ON CONFLICT DO NOTHING
RETURNING source_id;

-- name: pending_text
SELECT pending_text FROM attachments WHERE user_id = $1 AND source_id = $2;

-- name: mark_indexed
UPDATE attachments SET chunks = $3, updated_at = now() WHERE user_id = $1 AND source_id = $2;

-- name: mark_ready
UPDATE attachments
SET status = 'ready', summary = $3, summary_mode = $4, pending_text = NULL, error = NULL, updated_at = now()
WHERE user_id = $1 AND source_id = $2
RETURNING source_id;

-- name: mark_failed
UPDATE attachments SET status = 'failed', error = $3, pending_text = NULL, updated_at = now()
WHERE user_id = $1 AND source_id = $2
RETURNING source_id;

-- name: expired
SELECT user_id, source_id FROM attachments WHERE expires_at < now() ORDER BY expires_at LIMIT $1;

-- name: delete
DELETE FROM attachments WHERE user_id = $1 AND source_id = $2;

-- name: forget
DELETE FROM attachments WHERE user_id = $1;
