-- Conversations (DESIGN §4, §9): messages stored once per user, content-addressed by their invariant
-- hash, and the branch-aware summaries of context compression (seed 002), keyed by the cumulative
-- hash of the last turn they cover. Summaries, memories and the shadow refer to messages by hash, so
-- job payloads stay small; every row carries user_id and every read filters on it (DESIGN §7).
CREATE TABLE messages (
    user_id     text NOT NULL,
    invariant   text NOT NULL CHECK (invariant ~ '^[0-9a-f]{64}$'),
    role        text NOT NULL,
    -- What a reader needs to rebuild the turn: role, content (pasted images as their digest, not
    -- their bytes), tool_calls, tool_call_id, name (echo.adapters.store.conversations.stored_message).
    message     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, invariant)
);

CREATE TABLE summaries (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id        text NOT NULL,
    -- The cumulative hash of the last covered turn: equal hashes mean equal prefixes, so a summary is
    -- valid for a branch exactly when this is the branch's hash at position covered_count.
    covered_hash   text NOT NULL CHECK (covered_hash ~ '^[0-9a-f]{64}$'),
    covered_count  integer NOT NULL CHECK (covered_count >= 1),
    -- The first head_count turns were kept verbatim (keep_first) and are not in the text.
    head_count     integer NOT NULL CHECK (head_count >= 0 AND head_count <= covered_count),
    text           text NOT NULL,
    locale         text NOT NULL,
    model          text NOT NULL,
    provider       text NOT NULL,
    -- The invariant hashes of the summarised turns, in order (the seed's ordered refs and fingerprints).
    refs           text[] NOT NULL DEFAULT '{}',
    input_tokens   integer NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    summary_tokens integer NOT NULL DEFAULT 0 CHECK (summary_tokens >= 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    -- One summary per branch point and user (a replayed job changes nothing); this index also serves
    -- the inlet's one lookup: user_id = $1 AND covered_hash = ANY($hashes of the current chain).
    CONSTRAINT summaries_branch_point UNIQUE (user_id, covered_hash)
);
