-- Wake idle workers on a new ready job instead of having them poll: NOTIFY on the tenant's channel
-- `echo_jobs_<schema>` with the job kind as payload. Delivered when the enqueuing transaction commits.
CREATE FUNCTION jobs_notify() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM pg_notify('echo_jobs_' || TG_TABLE_SCHEMA, NEW.kind);
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_notify_ready
    AFTER INSERT OR UPDATE OF state ON jobs
    FOR EACH ROW
    WHEN (NEW.state = 'pending' AND NEW.run_after <= now())
    EXECUTE FUNCTION jobs_notify();
