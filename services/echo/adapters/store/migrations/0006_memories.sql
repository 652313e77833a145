-- Long-term memories (seed 000, filter 2; DESIGN §9). PostgreSQL holds each memory's text, its
-- version and its history; the tenant's echo_memory Qdrant collection holds its vector (point id =
-- memories.id) and is an index of this table: indexed_version says which version the index holds,
-- so a worker that died between the two writes is caught up by the job's retry. Every row carries
-- user_id and every read filters on it (DESIGN §7).
CREATE TABLE memories (
    user_id         text NOT NULL,
    id              text NOT NULL,
    -- The short technical id the distillation named the memory with (seed 000's memory_id).
    memory_id       text NOT NULL,
    summary         text NOT NULL,
    importance      smallint NOT NULL CHECK (importance BETWEEN 1 AND 5),
    tags            text[] NOT NULL DEFAULT '{}',
    -- The chat the memory was first distilled from.
    chat_id         text,
    -- 1 when created; +1 per merge (a touch changes only updated_at). Writers compare and set it.
    version         integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    indexed_version integer NOT NULL DEFAULT 0 CHECK (indexed_version >= 0),
    -- Every window it came from: [{"chat_id", "window", "invariants", "message_ids"}] (echo.domain.memory.records).
    provenance      jsonb NOT NULL DEFAULT '[]',
    provider        text NOT NULL,
    model           text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- The seed's date: the last time the memory was created, merged or touched.
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, id)
);
CREATE INDEX memories_by_update ON memories (user_id, updated_at DESC);

-- The versions a merge replaced, so a fact that was replaced can still be read and the history says so.
CREATE TABLE memory_versions (
    user_id      text NOT NULL,
    memory       text NOT NULL,
    version      integer NOT NULL,
    summary      text NOT NULL,
    importance   smallint NOT NULL,
    tags         text[] NOT NULL DEFAULT '{}',
    provenance   jsonb NOT NULL DEFAULT '[]',
    -- The window whose merge replaced this version.
    replaced_by  text,
    replaced_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, memory, version),
    FOREIGN KEY (user_id, memory) REFERENCES memories (user_id, id) ON DELETE CASCADE
);

-- What each distilled window did (the distill job's idempotency key is the window's key): a
-- replayed job, a retry after a crash or a second delivery finds its row and changes nothing more.
CREATE TABLE memory_windows (
    user_id     text NOT NULL,
    window_key  text NOT NULL CHECK (window_key ~ '^[0-9a-f]{64}$'),
    chat_id     text,
    outcome     text NOT NULL CHECK (outcome IN ('created', 'merged', 'touched', 'discarded')),
    memory      text,
    reason      text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, window_key)
);
