-- Retention of finished jobs (echo.queue.retention): the sweep deletes done and dead rows by age,
-- oldest first, from these partial indexes. The dead one carries the kind so that the depth gauges
-- count dead letters by kind from the index alone; done rows are never counted (query `counts`).
CREATE INDEX jobs_done_finished ON jobs (finished_at) WHERE state = 'done';
CREATE INDEX jobs_dead_finished ON jobs (finished_at) INCLUDE (kind) WHERE state = 'dead';
