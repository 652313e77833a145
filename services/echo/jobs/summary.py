"""The `summary` job (seed 002, branch-aware): fold the previous summary and new turns into one.

The outlet of `echo_compression` plans a summary (`echo.compression.planning`) and enqueues one job
per branch point (`SummaryJob`, key `planning.summary_job_key`). The payload holds references, not a
transcript: the invariant hashes of the planned turns (their messages are in the conversation store),
the cumulative hash before them, the key of the previous summary, and the valves in force when it was
planned (model, window, style, temperature, fail mode, locale).

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
5. calls the LLM port (`echo.llm`; the offline provider when no model is configured) with the
   instructions as system text, `summary_temperature` and `max_summary_tokens`;
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import structlog

from echo import chain, metrics, offload, tokens
from echo.compression import budgets, fence, fitting, planning, prompts
from echo.compression import messages as msgs
from echo.jobs import domain, errors, handling
from echo.llm import errors as llm_errors
from echo.llm import interface as llm
from echo.store import conversations
from echo.store import errors as store_errors

__all__ = ["PAYLOAD_VERSION", "THREAD_TURNS", "SummaryHandler", "SummaryJob"]

log = structlog.get_logger("echo.jobs.summary")
_Failure = handling.Failure  # a step failed (reason, retryable): see echo.jobs.handling

PAYLOAD_VERSION = 1
THREAD_TURNS = 500  # from this many planned turns, the CPU-bound steps run on a worker thread
FailMode = Literal["silent", "raise"]
_INPUT_TAG = "\n<compression_input>\n"
_R = TypeVar("_R")


@dataclass(frozen=True)
class SummaryJob:
    """One planned summary, as the job payload carries it (see the module docstring)."""

    user_id: str
    head_count: int
    start: int
    parent: str | None
    invariants: tuple[str, ...]
    covered_hash: str
    previous: str | None
    model: str  # "" = the worker's default model (ECHO_LLM_MODEL)
    window: budgets.SummaryWindow
    style: prompts.Style = "balanced"
    temperature: float = 0.1
    fail_mode: FailMode = "silent"
    locale: str = "en-US"
    chat_id: str | None = None

    @classmethod
    def planned(
        cls,
        plan: planning.SummaryPlan,
        *,
        user_id: str,
        parent: str | None,
        model: str,
        window: budgets.SummaryWindow,
        style: prompts.Style,
        temperature: float,
        fail_mode: FailMode,
        locale: str,
        chat_id: str | None = None,
    ) -> SummaryJob:
        """The job of ``plan``; ``parent`` is the cumulative hash of the turn before ``plan.start``."""
        return cls(
            user_id=user_id,
            head_count=plan.head_count,
            start=plan.start,
            parent=parent,
            invariants=plan.invariants,
            covered_hash=plan.covered_hash,
            previous=plan.previous.covered_hash if plan.previous is not None else None,
            model=model,
            window=window,
            style=style,
            temperature=temperature,
            fail_mode=fail_mode,
            locale=locale,
            chat_id=chat_id,
        )

    @property
    def key(self) -> str:
        return planning.summary_job_key(self.user_id, self.covered_hash)

    @property
    def lock_scope(self) -> str:
        """What jobs that must not run at once share: the chat, else the turn their branch starts
        from (the jobs of one branch fold the same previous summary or start at the same head)."""
        if self.chat_id:
            return f"chat:{self.chat_id}"
        return f"branch:{self.previous or self.parent or self.invariants[0]}"

    def to_payload(self) -> dict[str, Any]:
        return {
            "v": PAYLOAD_VERSION,
            "user_id": self.user_id,
            "chat_id": self.chat_id,
            "head_count": self.head_count,
            "start": self.start,
            "parent": self.parent,
            "invariants": list(self.invariants),
            "covered_hash": self.covered_hash,
            "previous": self.previous,
            "model": self.model,
            "window": {
                "input_tokens": self.window.input_tokens,
                "output_tokens": self.window.output_tokens,
                "source": self.window.source,
            },
            "style": self.style,
            "temperature": self.temperature,
            "fail_mode": self.fail_mode,
            "locale": self.locale,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> SummaryJob:
        """The job a payload describes; ``PermanentJobError`` naming the field when it is malformed."""
        try:
            window = payload["window"]
            job = cls(
                user_id=_text(payload, "user_id"),
                head_count=int(payload["head_count"]),
                start=int(payload["start"]),
                parent=payload.get("parent"),
                invariants=tuple(payload["invariants"]),
                covered_hash=_text(payload, "covered_hash"),
                previous=payload.get("previous"),
                model=str(payload.get("model") or ""),
                window=budgets.SummaryWindow(
                    int(window["input_tokens"]), int(window["output_tokens"]), str(window.get("source", ""))
                ),
                style=payload.get("style", "balanced"),
                temperature=float(payload.get("temperature", 0.1)),
                fail_mode=payload.get("fail_mode", "silent"),
                locale=str(payload.get("locale") or "en-US"),
                chat_id=payload.get("chat_id"),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise errors.PermanentJobError(f"malformed summary payload: {error!r}") from error
        problems = job._problems()
        if payload.get("v", PAYLOAD_VERSION) != PAYLOAD_VERSION:
            problems.append(f"v: this worker reads version {PAYLOAD_VERSION}, not {payload.get('v')!r}")
        if problems:
            raise errors.PermanentJobError("malformed summary payload: " + "; ".join(problems))
        return job

    def _problems(self) -> list[str]:
        problems = []
        if not self.invariants:
            problems.append("invariants: no turn to summarise")
        if self.previous is not None and not isinstance(self.previous, str):
            problems.append("previous: a covered hash or null")
        if not 0 <= self.head_count <= self.start:
            problems.append(f"head_count {self.head_count} must lie in 0..start ({self.start})")
        if (self.start == 0) != (self.parent is None):
            problems.append("parent: required exactly when start > 0")
        if self.style not in prompts.STYLES:
            problems.append(f"style: one of {sorted(prompts.STYLES)}, not {self.style!r}")
        if self.fail_mode not in ("silent", "raise"):
            problems.append(f"fail_mode: silent or raise, not {self.fail_mode!r}")
        if not 0.0 <= self.temperature <= 2.0:
            problems.append("temperature: in [0, 2]")
        if self.window.input_tokens < 1 or self.window.output_tokens < 1:
            problems.append("window: positive token budgets")
        return problems

    def hashes(self) -> tuple[str, ...]:
        """The cumulative hash of every planned turn, from ``parent`` and the invariants."""
        try:
            parent, out = self.parent, []
            for invariant in self.invariants:
                parent = chain.cumulative_hash(invariant, parent)
                out.append(parent)
        except ValueError as error:
            raise errors.PermanentJobError(f"malformed summary payload: {error}") from error
        if out[-1] != self.covered_hash:
            raise errors.PermanentJobError("malformed summary payload: the refs do not lead to covered_hash")
        return tuple(out)


def _text(payload: Mapping[str, Any], key: str) -> str:
    value = payload[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key}: expected a non-empty string")
    return value


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
        store: conversations.Conversations,
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

    async def __call__(self, job: domain.Job, /) -> None:
        spec = SummaryJob.from_payload(job.payload)
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
        metrics.COMPRESSION_SUMMARIES.labels(outcome).inc()
        if outcome == "created":
            metrics.COMPRESSION_SUMMARY_SECONDS.observe(time.perf_counter() - started)

    async def _summarise(self, spec: SummaryJob, bound: Any) -> str:
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

        def fit() -> tuple[fitting.SummaryInput, int]:
            """The prompt that fits the window, and the tokens of what it holds."""
            fitted = fitting.fit_summary_input(
                plan, planned, window=spec.window, style=spec.style, locale=spec.locale, counter=self._counter
            )
            input_tokens = sum(msgs.message_tokens(m, self._counter) for m in planned[: fitted.taken])
            input_tokens += self._counter(previous.summary.text) if previous is not None else 0
            return fitted, input_tokens

        fitted, input_tokens = await _cpu(len(planned), fit)
        text, result = await self._generate(spec, fitted)
        refs = _refs(previous, plan, fitted.taken)
        summary_tokens = self._counter(text)
        saved = await self.store.save_summary(
            conversations.NewSummary(
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
        metrics.COMPRESSION_SUMMARY_RATIO.observe(input_tokens / max(1, summary_tokens))
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

    async def _newer_on_head(self, spec: SummaryJob) -> int | None:
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

    async def _generate(self, spec: SummaryJob, fitted: fitting.SummaryInput) -> tuple[str, llm.LLMResult]:
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
        return text, result

    async def _failed(self, job: domain.Job, spec: SummaryJob, failure: _Failure, bound: Any) -> None:
        """Count the failure, then retry, or give up (the chat's next inlet says so) silently or
        dead-lettered (``summary_fail_mode``)."""
        metrics.COMPRESSION_SUMMARY_FAILURES.labels(failure.reason).inc()
        if failure.retryable and job.attempts < self.max_attempts:
            metrics.COMPRESSION_SUMMARIES.labels("retry").inc()
            bound.warning("summary_retry", reason=failure.reason, error=str(failure), attempt=job.attempts)
            raise errors.RetryLater(str(failure))
        metrics.COMPRESSION_SUMMARIES.labels("failed").inc()
        bound.error("summary_failed", reason=failure.reason, error=str(failure), fail_mode=spec.fail_mode)
        if spec.chat_id:
            try:
                await self.store.record_summary_failure(
                    spec.user_id, spec.chat_id, failure.reason, str(failure)
                )
            except store_errors.StoreError as error:  # the job's own outcome stands; only the notice is lost
                bound.warning("summary_failure_not_recorded", error=str(error))
        if spec.fail_mode == "raise":
            raise errors.PermanentJobError(str(failure))


async def _cpu(size: int, work: Callable[[], _R]) -> _R:
    """`work()`, on a worker thread for `THREAD_TURNS` turns or more (see the module docstring)."""
    if size < THREAD_TURNS:
        return work()
    return await offload.to_thread(work)


def _refs(previous: conversations.SummaryRow | None, plan: planning.SummaryPlan, taken: int) -> list[str]:
    """The invariant hashes the new summary stands for, in order: the previous one's, then the new turns'."""
    kept: Sequence[str] = ()
    if previous is not None:
        kept = previous.refs[: max(0, plan.start - previous.summary.head_count)]
    return [*kept, *plan.invariants[:taken]]
