-- Summary failures not yet shown (echo_compression, DESIGN §6): when a summary job of a chat gives up
-- (summary_fail_mode silent skips it, raise dead-letters it), the handler writes one row per user and
-- chat; the chat's next inlet takes it (DELETE ... RETURNING inside its one summary lookup) and shows a
-- status event once. A later summary of the chat that succeeds removes the row: nothing stale is shown.
CREATE TABLE summary_failures (
    user_id    text NOT NULL,
    chat_id    text NOT NULL CHECK (chat_id <> ''),
    -- echo_compression_summary_failures_total's reason: llm | empty | missing_input.
    reason     text NOT NULL,
    -- What went wrong, short (at most 200 characters), as the status event says it.
    detail     text NOT NULL,
    -- Failed jobs since the chat's last inlet (each overwrites reason and detail: the latest is shown).
    failures   integer NOT NULL DEFAULT 1 CHECK (failures >= 1),
    failed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, chat_id)
);
