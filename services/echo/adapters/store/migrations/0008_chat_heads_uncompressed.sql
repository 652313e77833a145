-- Chat heads are rewritten on every completed turn (echo_compression's outlet): a 500-turn branch is a
-- 32 KB array of hex hashes, and compressing it again on each write (pglz, the default EXTENDED
-- storage) doubled the cost of the outlet's write (about 2.7 ms against 1.2 ms). Out of line,
-- uncompressed: rows are rewritten uncompressed from their next update on.
ALTER TABLE chat_heads ALTER COLUMN invariants SET STORAGE EXTERNAL;
