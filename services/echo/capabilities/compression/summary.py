"""The `summary` job (seed 002, branch-aware): fold the previous summary and new turns into one.

The outlet of `echo_compression` plans a summary (`echo.domain.compression.planning`) and enqueues one job
per branch point (`payloads.SummaryPayload`, key `planning.summary_job_key`): references, not a
transcript, and the valves in force when it was planned. The worker validates the stored payload into
that model before the handler runs (`echo.queue.payloads`).

The handler:
1. recomputes the planned turns' cumulative hashes from the payload (the last must be its key);
2. takes the chat's summary lock (``Conversations.summary_lock``, per user and chat id, else per
   branch start), so two jobs of one chat never run at once: when turns outpace summaries (a job for
   turn 40 still running when the outlet of turn 45 queues the next), the later one waits and then
   builds on the earlier one's summary instead of folding the same previous summary twice;
3. skips work already done: when a summary of this branch already covers every planned turn, the job
   is done (``existing``); when the chat's latest branch still passes through this job's branch point
   and a summary of it already covers more (a later job ran first), the job is ``superseded``; when a
   summary covers a part of the planned turns (an earlier job finished meanwhile), it folds that one
   in and summarises only the rest;
4. loads the messages by hash and fits the prompt into the summary window (`fitting`): the summary
   may cover fewer turns than planned, and its key is then the hash of the last turn it holds;
5. calls the LLM port (`echo.adapters.llm`; the offline provider when no model is configured) with the
   instructions as system text, `summary_temperature` and the summary's target as `max_output_tokens`:
   `max_summary_share` of what the covered turns cost (the previous summary's turns loaded by their
   refs), at most `max_summary_tokens` (`echo.domain.compression.lengths`); an answer longer than the
   target is trimmed, or refused (retried) when it cannot be;
6. stores the summary with the ordered refs it covers, once per `(user_id, covered_hash)`.

CPU: the steps that walk every planned turn (their hashes, the fitting and its token counts, the
branch's hashes) run on a worker thread (`asyncio.to_thread`) once a job holds `THREAD_TURNS` turns,
so that an in-process worker (embedded `serve`) never holds the hooks' event loop: a 20,000-message
chat's summary held it for seconds.

Failures: an empty answer (a reasoning-only one comes back empty from the providers) or an LLM
error is retried with the queue's backoff while attempts remain (a non-retryable LLM error other than
an empty answer is not); then `summary_fail_mode` decides: `silent` logs, counts and ends the job,
`raise` dead-letters it. Missing inputs (a forgotten user) end the job as a permanent error. Either
way a job that gives up records the failure for its chat (`Conversations.record_summary_failure`):
the chat's next inlet tells the user, once; a later summary of the chat that succeeds clears it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import structlog

from echo.adapters.llm import errors as llm_errors
from echo.capabilities import handling
from echo.capabilities.compression import metrics as compression_metrics
from echo.capabilities.compression import payloads
from echo.domain import chain, tokens
from echo.domain import jobs as domain
from echo.domain.compression import fence, fitting, lengths, planning
from echo.domain.compression import messages as msgs
from echo.ports import llm
from echo.ports import store as store_port
from echo.queue import errors
from echo.support import offload

__all__ = ["THREAD_TURNS", "SummaryHandler"]

log = structlog.get_logger("echo.jobs.summary")
_Failure = handling.Failure  # a step failed (reason, retryable): see echo.capabilities.handling

THREAD_TURNS = 500  # from this many planned turns, the CPU-bound steps run on a worker thread
_INPUT_TAG = "\n<compression_input>\n"
_R = TypeVar("_R")


def split_prompt(prompt: str) -> tuple[str, str]:
    """``(system, user)``: the instructions as system text, the input as the user message.

    The offline provider summarises the user message only, so the instructions stay out of its
    extractive summary; a model gets the same words either way."""
    at = prompt.find(_INPUT_TAG)
    if at <= 0:
        return "", prompt
    return prompt[:at].rstrip(), prompt[at + 1 :]


class SummaryHandler:
    """Runs `summary` jobs with the conversation store and an LLM (built on first use by ``llm_factory``)."""

    def __init__(
        self,
        store: store_port.ConversationStore,
        llm_factory: Callable[[], llm.LLM],
        *,
        max_attempts: int,
        default_model: str,
        counter: msgs.TokenCounter = tokens.estimate_tokens,
    ) -> None:
        self.store = store
        self.default_model = default_model
        self._llm = handling.LazyLLM(llm_factory)
        self.max_attempts = max_attempts
        self._counter = counter

    async def aclose(self) -> None:
        await self._llm.aclose()

    async def __call__(self, job: domain.Job, spec: payloads.SummaryPayload, /) -> None:
        started = time.perf_counter()
        bound = log.bind(user_id=spec.user_id, chat_id=spec.chat_id, covered_hash=spec.covered_hash[:12])
        try:
            async with self.store.summary_lock(spec.user_id, spec.lock_scope):
                outcome = await self._summarise(spec, bound)
        except _Failure as failure:
            await self._failed(job, spec, failure, bound)
            return
        if spec.chat_id:
            await self.store.clear_summary_failure(spec.user_id, spec.chat_id)
        compression_metrics.COMPRESSION_SUMMARIES.labels(outcome).inc()
        if outcome == "created":
            compression_metrics.COMPRESSION_SUMMARY_SECONDS.observe(time.perf_counter() - started)

    async def _summarise(self, spec: payloads.SummaryPayload, bound: Any) -> str:
        hashes = await _cpu(len(spec.invariants), spec.hashes)
        done = await self.store.summaries_at(spec.user_id, hashes)
        reached = [k for k, key in enumerate(hashes) if done.get(key) == spec.start + k + 1]
        if reached and reached[-1] == len(hashes) - 1:
            bound.info("summary_exists")
            return "existing"
        newer = await self._newer_on_head(spec)
        if newer is not None:
            bound.info("summary_superseded", covered_count=newer)
            return "superseded"
        skip = reached[-1] + 1 if reached else 0
        previous_key = hashes[skip - 1] if skip else spec.previous
        previous = await self.store.summary(spec.user_id, previous_key) if previous_key else None
        if previous_key and previous is None:
            raise _Failure("missing_input", f"previous summary {previous_key[:12]} is gone", retryable=False)
        invariants, planned_hashes = spec.invariants[skip:], hashes[skip:]
        loaded = await self.store.messages(spec.user_id, invariants)
        missing = [key for key in invariants if key not in loaded]
        if missing:
            raise _Failure(
                "missing_input", f"{len(missing)} planned messages are not stored", retryable=False
            )
        planned = [loaded[key] for key in invariants]
        plan = planning.SummaryPlan(
            head_count=spec.head_count,
            start=spec.start + skip,
            stop=spec.start + len(spec.invariants),
            positions=tuple(range(len(planned))),
            invariants=invariants,
            hashes=planned_hashes,
            previous=previous.summary if previous is not None else None,
        )

        earlier = await self._covered_before(spec.user_id, previous)

        def fit() -> tuple[fitting.SummaryInput, int]:
            """The prompt that fits the window, and the tokens of what it holds."""
            fitted = fitting.fit_summary_input(
                plan,
                planned,
                window=spec.window,
                style=spec.style,
                locale=spec.locale,
                counter=self._counter,
                max_share=spec.max_share,
                covered_before_tokens=earlier(),
            )
            input_tokens = sum(msgs.message_tokens(m, self._counter) for m in planned[: fitted.taken])
            input_tokens += self._counter(previous.summary.text) if previous is not None else 0
            return fitted, input_tokens

        fitted, input_tokens = await _cpu(len(planned), fit)
        text, result = await self._generate(spec, fitted)
        refs = _refs(previous, plan, fitted.taken)
        summary_tokens = self._counter(text)
        saved = await self.store.save_summary(
            store_port.NewSummary(
                user_id=spec.user_id,
                covered_hash=fitted.covered_hash,
                covered_count=fitted.covered_count,
                head_count=fitted.head_count,
                text=text,
                locale=spec.locale,
                model=result.model,
                provider=result.provider,
                refs=refs,
                input_tokens=input_tokens,
                summary_tokens=summary_tokens,
            )
        )
        if not saved:
            bound.info("summary_exists", covered_count=fitted.covered_count)
            return "existing"
        compression_metrics.COMPRESSION_SUMMARY_RATIO.observe(input_tokens / max(1, summary_tokens))
        bound.info(
            "summary_created",
            covered_count=fitted.covered_count,
            turns=fitted.taken,
            planned=len(planned),
            truncated=fitted.truncated,
            input_tokens=input_tokens,
            summary_tokens=summary_tokens,
            provider=result.provider,
            degraded=result.degraded,
        )
        return "created"

    async def _covered_before(
        self, user_id: str, previous: store_port.SummaryRow | None
    ) -> Callable[[], int]:
        """What the turns the previous summary stands for cost as messages (its refs, loaded), as a
        function to call where the CPU work is done; refs no longer stored count nothing."""
        if previous is None or not previous.refs:
            return lambda: 0
        loaded = await self.store.messages(user_id, list(dict.fromkeys(previous.refs)))
        refs = previous.refs
        return lambda: sum(msgs.message_tokens(loaded[key], self._counter) for key in refs if key in loaded)

    async def _newer_on_head(self, spec: payloads.SummaryPayload) -> int | None:
        """How many turns a summary covers that already goes past this job's branch point on the
        chat's latest branch (which still passes through that point), or None."""
        if not spec.chat_id:
            return None
        head = await self.store.latest_branch(spec.user_id, spec.chat_id)
        stop = spec.start + len(spec.invariants)
        if head is None or len(head) <= stop:
            return None

        def chained() -> list[str]:
            parent: str | None = None
            out = []
            for invariant in head:
                parent = chain.cumulative_hash(invariant, parent)
                out.append(parent)
            return out

        head_hashes = await _cpu(len(head), chained)
        if head_hashes[stop - 1] != spec.covered_hash:
            return None
        row = await self.store.best_summary(spec.user_id, head_hashes)
        if row is None or row.summary.covered_count <= stop:
            return None
        return row.summary.covered_count

    async def _generate(
        self, spec: payloads.SummaryPayload, fitted: fitting.SummaryInput
    ) -> tuple[str, llm.LLMResult]:
        if fitted.max_output_tokens < 1:
            raise _Failure("too_small", "the covered turns are too small to summarise", retryable=False)
        system, prompt = split_prompt(fitted.prompt)
        request = llm.LLMRequest(
            model=spec.model or self.default_model,
            messages=[("user", prompt)],
            system=system,
            temperature=spec.temperature,
            max_output_tokens=fitted.max_output_tokens,
            purpose="summary",
        )
        model = await self._llm.get()
        try:
            result = await model.generate(request)
        except llm_errors.EmptyAnswer as error:
            raise _Failure("empty", f"the summary model answered no text: {error}", retryable=True) from error
        except llm_errors.LLMError as error:
            raise _Failure("llm", f"summary model failed: {error}", retryable=error.retryable) from error
        text = result.text.strip()
        if not fence.strip_reply_guidance(text):
            raise _Failure("empty", "the summary model answered no usable text", retryable=True)
        fitting_text = lengths.trim_summary(text, fitted.max_output_tokens, self._counter)
        if fitting_text is None:
            raise _Failure(
                "too_long",
                f"the summary ({self._counter(text)} tokens) cannot be trimmed to its target of "
                f"{fitted.max_output_tokens} tokens",
                retryable=True,
            )
        return fitting_text, result

    async def _failed(
        self, job: domain.Job, spec: payloads.SummaryPayload, failure: _Failure, bound: Any
    ) -> None:
        """Count the failure, then retry, or give up (the chat's next inlet says so) silently or
        dead-lettered (``summary_fail_mode``)."""
        compression_metrics.COMPRESSION_SUMMARY_FAILURES.labels(failure.reason).inc()
        if failure.retryable and job.attempts < self.max_attempts:
            compression_metrics.COMPRESSION_SUMMARIES.labels("retry").inc()
            bound.warning("summary_retry", reason=failure.reason, error=str(failure), attempt=job.attempts)
            raise errors.RetryLater(str(failure))
        compression_metrics.COMPRESSION_SUMMARIES.labels("failed").inc()
        bound.error("summary_failed", reason=failure.reason, error=str(failure), fail_mode=spec.fail_mode)
        if spec.chat_id:
            try:
                await self.store.record_summary_failure(
                    spec.user_id, spec.chat_id, failure.reason, str(failure)
                )
            except store_port.StoreError as error:  # the job's own outcome stands; only the notice is lost
                bound.warning("summary_failure_not_recorded", error=str(error))
        if spec.fail_mode == "raise":
            raise errors.PermanentJobError(str(failure))


async def _cpu(size: int, work: Callable[[], _R]) -> _R:
    """`work()`, on a worker thread for `THREAD_TURNS` turns or more (see the module docstring)."""
    if size < THREAD_TURNS:
        return work()
    return await offload.to_thread(work)


def _refs(previous: store_port.SummaryRow | None, plan: planning.SummaryPlan, taken: int) -> list[str]:
    """The invariant hashes the new summary stands for, in order: the previous one's, then the new turns'."""
    kept: Sequence[str] = ()
    if previous is not None:
        kept = previous.refs[: max(0, plan.start - previous.summary.head_count)]
    return [*kept, *plan.invariants[:taken]]
