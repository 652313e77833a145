-- The branch-valid summary lookup (DESIGN §4), written once: the inlet's lookup, the outlet's one
-- statement and best_summary all select from it. The summary of user p_user that covers the most
-- turns of the branch whose turn hashes are p_hashes, in order: valid only when its key is the
-- branch's hash at the position it covers. The newest summary of a branch usually sits near its
-- end: the last 128 positions are probed first, newest first, on summaries_branch_point, stopping at
-- the first found; only when none is there are the other positions probed, all at once (then the
-- most turns covered wins). The cost follows the branch's length, not the user's number of summaries.
-- A single SQL SELECT, STABLE: the planner inlines it into the statement that calls it.
CREATE FUNCTION best_branch_summary(p_user text, p_hashes text[])
RETURNS TABLE (
    id bigint, covered_hash text, covered_count integer, head_count integer, text text, locale text,
    model text, provider text, refs text[], created_at float8
)
LANGUAGE sql STABLE
AS $$
    (SELECT found.*
     FROM generate_series(cardinality(p_hashes), greatest(1, cardinality(p_hashes) - 127), -1) AS k,
          LATERAL (SELECT s.id, s.covered_hash, s.covered_count, s.head_count, s.text, s.locale, s.model,
                          s.provider, s.refs, extract(epoch FROM s.created_at)::float8
                   FROM summaries AS s
                   WHERE s.user_id = p_user AND s.covered_hash = p_hashes[k] AND s.covered_count = k
                   LIMIT 1) AS found
     LIMIT 1)
    UNION ALL
    (SELECT s.id, s.covered_hash, s.covered_count, s.head_count, s.text, s.locale, s.model, s.provider,
            s.refs, extract(epoch FROM s.created_at)::float8
     FROM summaries AS s
     WHERE s.user_id = p_user
       AND s.covered_hash = ANY(p_hashes[1:cardinality(p_hashes) - 128])
       AND s.covered_count <= cardinality(p_hashes) - 128
       AND p_hashes[s.covered_count] = s.covered_hash
     ORDER BY s.covered_count DESC, s.created_at DESC
     LIMIT 1)
    LIMIT 1
$$;
