-- Chat heads: the latest branch ECHO has seen of each chat (per user), written by echo_compression's
-- outlet. Open WebUI's chat id names a tree of branches; the head is the branch its last completed
-- turn stands on, as the ordered invariant hashes of its turns (system messages excluded, as in the
-- chain the summaries cover). The messages themselves are in `messages` (0004), so a reader rebuilds
-- the branch's transcript and its cumulative hashes from this row alone. Readers: referenced chats
-- (a chat dragged into another one) and manual compaction (POST /chats/{chat_id}/compact).
CREATE TABLE chat_heads (
    user_id     text NOT NULL,
    chat_id     text NOT NULL CHECK (chat_id <> ''),
    invariants  text[] NOT NULL,
    -- The cumulative hash of the last turn (echo.domain.chain), so two chats on the same branch compare
    -- equal without reading their arrays; NULL for an empty branch.
    head_hash   text CHECK (head_hash ~ '^[0-9a-f]{64}$'),
    turns       integer NOT NULL CHECK (turns >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, chat_id)
);
