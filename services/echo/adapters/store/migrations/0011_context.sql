-- The context filter (seed 000, filter 1; DESIGN §9): the chat's file registry and the model's own
-- registries (plans, codex) that the AEC block lists every turn. Every row carries user_id and every
-- read filters on it (DESIGN §7); DELETE /users/{id} deletes them (echo.capabilities.memory.forgetting).

-- One row per file ECHO handled in a chat. source_id is the seed's U_<user>_C_<chat>_T_<unix time>;
-- the ephemeral RAG's chunks (Qdrant echo_ephemeral) carry it. The same content sent twice in a chat
-- is one row (content_sha256), so it is ingested once.
CREATE TABLE attachments (
    user_id        text NOT NULL,
    source_id      text NOT NULL,
    chat_id        text NOT NULL,
    -- Open WebUI's file id (the first one this content was sent as).
    file_id        text,
    filename       text NOT NULL,
    mime_type      text NOT NULL,
    -- inline: the text went into the turn; native: a media part for the model; rag_ephemeral:
    -- chunked into the ephemeral RAG, summarised by a map_reduce job.
    mode           text NOT NULL CHECK (mode IN ('inline', 'native', 'rag_ephemeral')),
    status         text NOT NULL CHECK (status IN ('pending', 'ready', 'failed')),
    content_sha256 text CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
    size_bytes     bigint NOT NULL DEFAULT 0 CHECK (size_bytes >= 0),
    -- The extracted text, kept until the map_reduce job has ingested it (then NULL), when the inlet had
    -- it from the body; otherwise the job reads the file from Open WebUI's files API.
    pending_text   text,
    summary        text,
    -- fast_path (short text, no LLM), map_reduce, or extractive (the offline provider).
    summary_mode   text,
    chunks         integer NOT NULL DEFAULT 0 CHECK (chunks >= 0),
    error          text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    -- Ephemeral: past this instant the row and its chunks are deleted (valve EPHEMERAL_RETENTION_HOURS).
    expires_at     timestamptz NOT NULL,
    PRIMARY KEY (user_id, source_id)
);
CREATE UNIQUE INDEX attachments_by_content ON attachments (user_id, chat_id, content_sha256)
    WHERE content_sha256 IS NOT NULL;
CREATE INDEX attachments_by_file ON attachments (user_id, chat_id, file_id);
CREATE INDEX attachments_by_expiry ON attachments (expires_at);

-- The model's plans for a chat (tool server: save_plan / update_plan), listed in registre_plan.
CREATE TABLE plans (
    user_id    text NOT NULL,
    chat_id    text NOT NULL,
    plan_id    text NOT NULL,
    goal       text NOT NULL,
    status     text NOT NULL CHECK (status IN ('todo', 'in_progress', 'blocked', 'done', 'abandoned')),
    model      text,
    steps      jsonb NOT NULL DEFAULT '[]',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, chat_id, plan_id)
);

-- The model's code registry for a chat (tool server: commit_code / read_code), listed in registre_codex.
CREATE TABLE codex_entries (
    user_id     text NOT NULL,
    chat_id     text NOT NULL,
    entry_id    text NOT NULL,
    lang        text NOT NULL,
    content     text NOT NULL,
    lines       integer NOT NULL CHECK (lines >= 0),
    last_commit text NOT NULL,
    version     integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, chat_id, entry_id)
);
