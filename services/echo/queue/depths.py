"""Queue depth as Prometheus gauges: `echo_jobs{kind,state}` and `echo_jobs_pending{kind}`.

Counted states are pending, running and dead (cheap: partial indexes); done rows are not counted,
their rate is `echo_job_duration_seconds_count{outcome="done"}`.
"""

from __future__ import annotations

from collections.abc import Iterable

from echo.domain import jobs as domain
from echo.queue import queue
from echo.support import metrics

__all__ = ["COUNTED_STATES", "refresh_gauges"]

COUNTED_STATES = (domain.JobState.PENDING, domain.JobState.RUNNING, domain.JobState.DEAD)


async def refresh_gauges(jobs: queue.JobQueue, kinds: Iterable[str] = ()) -> None:
    """Set the gauges from one count query; `kinds` (those a worker runs) are shown at 0 when empty."""
    depths = await jobs.depths()
    counts = {(depth.kind, depth.state): depth.jobs for depth in depths}
    for kind in set(kinds) | {depth.kind for depth in depths}:
        for state in COUNTED_STATES:
            metrics.JOBS.labels(kind, state.value).set(counts.get((kind, state), 0))
        metrics.JOBS_PENDING.labels(kind).set(sum(d.ready for d in depths if d.kind == kind))
