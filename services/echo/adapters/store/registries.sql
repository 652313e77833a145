-- Queries of the model's registries (migration 0011: plans, codex_entries). Every statement filters
-- on user_id AND chat_id (DESIGN §7): a plan or a code entry belongs to one chat of one user.

-- name: save_plan
-- Create the plan, or replace its goal and status; steps and model are kept when not given (NULL).
INSERT INTO plans (user_id, chat_id, plan_id, goal, status, model, steps)
VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7::jsonb, '[]'::jsonb))
ON CONFLICT (user_id, chat_id, plan_id) DO UPDATE
SET goal = EXCLUDED.goal,
    status = EXCLUDED.status,
    model = COALESCE($6, plans.model),
    steps = COALESCE($7::jsonb, plans.steps),
    updated_at = now()
RETURNING plan_id, goal, status, model, steps,
          extract(epoch FROM created_at)::float8 AS created_at, extract(epoch FROM updated_at)::float8 AS updated_at;

-- name: update_plan
-- Change what is given (NULL: keep); no row when the plan is not this user's and this chat's.
UPDATE plans
SET goal = COALESCE($4, goal),
    status = COALESCE($5, status),
    steps = COALESCE($6::jsonb, steps),
    updated_at = now()
WHERE user_id = $1 AND chat_id = $2 AND plan_id = $3
RETURNING plan_id, goal, status, model, steps,
          extract(epoch FROM created_at)::float8 AS created_at, extract(epoch FROM updated_at)::float8 AS updated_at;

-- name: get_plan
SELECT plan_id, goal, status, model, steps,
       extract(epoch FROM created_at)::float8 AS created_at, extract(epoch FROM updated_at)::float8 AS updated_at
FROM plans
WHERE user_id = $1 AND chat_id = $2 AND plan_id = $3;

-- name: list_plans
-- The $3 most recently updated plans of the chat, oldest first (the order they were made in).
SELECT * FROM (
    SELECT plan_id, goal, status, model, steps,
           extract(epoch FROM created_at)::float8 AS created_at, extract(epoch FROM updated_at)::float8 AS updated_at
    FROM plans
    WHERE user_id = $1 AND chat_id = $2
    ORDER BY updated_at DESC, plan_id
    LIMIT $3
) recent
ORDER BY created_at, plan_id;

-- name: snapshot_plans
-- What the AEC block lists of the $3 most recently updated plans (no steps: the block does not show them).
SELECT * FROM (
    SELECT plan_id, goal, status, model, created_at
    FROM plans
    WHERE user_id = $1 AND chat_id = $2
    ORDER BY updated_at DESC, plan_id
    LIMIT $3
) recent
ORDER BY created_at, plan_id;

-- name: commit_code
-- Create the entry (version 1) or replace its content, one version up.
INSERT INTO codex_entries (user_id, chat_id, entry_id, lang, content, lines, last_commit)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (user_id, chat_id, entry_id) DO UPDATE
SET lang = EXCLUDED.lang,
    content = EXCLUDED.content,
    lines = EXCLUDED.lines,
    last_commit = EXCLUDED.last_commit,
    version = codex_entries.version + 1,
    updated_at = now()
RETURNING entry_id, lang, lines, last_commit, version,
          extract(epoch FROM created_at)::float8 AS created_at, extract(epoch FROM updated_at)::float8 AS updated_at;

-- name: read_code
SELECT entry_id, lang, content, lines, last_commit, version,
       extract(epoch FROM created_at)::float8 AS created_at, extract(epoch FROM updated_at)::float8 AS updated_at
FROM codex_entries
WHERE user_id = $1 AND chat_id = $2 AND entry_id = $3;

-- name: list_code
-- The $3 most recently committed entries of the chat (without their content), oldest first.
SELECT * FROM (
    SELECT entry_id, lang, lines, last_commit, version,
           extract(epoch FROM created_at)::float8 AS created_at, extract(epoch FROM updated_at)::float8 AS updated_at
    FROM codex_entries
    WHERE user_id = $1 AND chat_id = $2
    ORDER BY updated_at DESC, entry_id
    LIMIT $3
) recent
ORDER BY created_at, entry_id;

-- name: forget_plans
DELETE FROM plans WHERE user_id = $1;

-- name: forget_codex
DELETE FROM codex_entries WHERE user_id = $1;
