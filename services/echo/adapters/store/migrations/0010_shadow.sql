-- The rich shadow (seed 001; DESIGN §4, §9): what Open WebUI strips from a conversation's history and
-- the Gemini pipe puts back before every call. Every row carries user_id in its key and every read
-- filters on it (DESIGN §7): two users with the same conversation never share a row, and
-- DELETE /users/{id} deletes theirs (echo.capabilities.memory.forgetting). Hashes are echo.domain.chain's hex SHA-256.

-- One row per point of a conversation the pipe saw (cumulative hash of the message there), and the
-- rich form of that message when it has one.
CREATE TABLE suture_index (
    user_id         text NOT NULL,
    cumulative_hash text NOT NULL CHECK (cumulative_hash ~ '^[0-9a-f]{64}$'),
    position        integer NOT NULL CHECK (position >= 0),
    parent_hash     text CHECK (parent_hash ~ '^[0-9a-f]{64}$'),
    invariant_hash  text NOT NULL CHECK (invariant_hash ~ '^[0-9a-f]{64}$'),
    chat_id         text NOT NULL DEFAULT '',
    role            text NOT NULL,
    -- The message as Gemini contents (echo.domain.shadow.parts): heavy parts as {"ref": payload_hash} into
    -- rich_payloads, function calls and results as indexes into tool_journal, signatures apart in
    -- cognitive_signatures. `json`, not `jsonb`: the text is kept as written (key order, numbers), so
    -- what goes back to Gemini is what came from it. NULL: an index row only (nothing to restore).
    rich            json,
    refs            text[] NOT NULL DEFAULT '{}',
    model           text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, cumulative_hash)
);
CREATE INDEX suture_index_by_chat ON suture_index (user_id, chat_id, position);

-- Heavy content stored once per user, content-addressed: payload_hash is the SHA-256 of the kind,
-- the MIME type and the bytes (echo.domain.shadow.parts.payload_hash), so the same attachment in two chats,
-- or in two turns, is one row.
CREATE TABLE rich_payloads (
    user_id      text NOT NULL,
    payload_hash text NOT NULL CHECK (payload_hash ~ '^[0-9a-f]{64}$'),
    kind         text NOT NULL CHECK (kind IN ('inline_data', 'text')),
    mime_type    text NOT NULL DEFAULT '',
    data         bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, payload_hash)
);

-- Gemini's thoughtSignatures, bytes exact, at the part of the content they came on.
CREATE TABLE cognitive_signatures (
    user_id         text NOT NULL,
    cumulative_hash text NOT NULL CHECK (cumulative_hash ~ '^[0-9a-f]{64}$'),
    content_index   integer NOT NULL CHECK (content_index >= 0),
    part_index      integer NOT NULL CHECK (part_index >= 0),
    signature       bytea NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, cumulative_hash, content_index, part_index)
);

-- Function calls of a model turn and, for the tools ECHO runs itself, their results. A call Open WebUI
-- runs has no result here: its result comes back in the history as a tool message.
CREATE TABLE tool_journal (
    user_id         text NOT NULL,
    cumulative_hash text NOT NULL CHECK (cumulative_hash ~ '^[0-9a-f]{64}$'),
    call_index      integer NOT NULL CHECK (call_index >= 0),
    call_id         text NOT NULL,
    name            text NOT NULL,
    arguments       json NOT NULL,
    response        json,
    executor        text NOT NULL CHECK (executor IN ('openwebui', 'echo')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, cumulative_hash, call_index)
);
CREATE INDEX tool_journal_by_call ON tool_journal (user_id, call_id);
