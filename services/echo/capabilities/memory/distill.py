"""The `distill` job (seed 000, filter 2): one window of a chat branch into long-term memory.

The outlet of `echo_memory` stores the window's messages in the conversation store and enqueues one
job per window (`payloads.DistillPayload`, idempotency key = the window's key, the cumulative hash of
its last message): references, not a transcript. The worker validates the stored payload into that
model before the handler runs (`echo.queue.payloads`). The handler:

1. checks the window's chain (the invariants from `parent` lead to its key) and whether the window
   was distilled already (`memory_windows`): then it only makes sure the vector index holds the
   memory's latest version (a worker that died between the two writes) and ends;
2. loads the messages by hash, cleans them (`echo.domain.memory.cleaning`), and discards a window with too
   few content words without calling the LLM (`echo.domain.memory.worth`);
3. asks the LLM (`DISTILLATION_MODEL`) for the distillation JSON: the window's facts, each one
   memory the size of a fact (`echo.domain.memory.distillation`; the offline provider answers with
   the heuristic distiller, `echo.domain.memory.facts`); an invalid answer is sent back once with
   its problems; a second invalid answer dead-letters the job with the raw text; the model may
   answer that nothing is worth remembering (no memory);
4. embeds the facts and, for each (keyed `fact_key(window, n)`: its memory's id, its provenance
   and its record in `memory_windows`, so a retry writes each fact once; the window itself is
   recorded after its last fact), under the user's lock (`MemoryStore.user_lock`), finds the user's nearest
   memory: an exact match only touches its date, a new one is inserted (row and vector in the
   lock, so the next window sees it); a similar one is merged by the LLM outside the lock, then
   written with a compare-and-set on its version: a merge that lost a race merges again into the
   new text, so concurrent merges into one memory lose nothing; earlier versions are kept;
5. writes the vector with the memory's payload (user_id, chat_id, timestamp, memory_importance,
   memory_id, tags, provenance, version, summary, sources) and marks the version indexed.

CPU: a window is small (`WINDOW_SIZE + WINDOW_OVERLAP` messages), but the valves may make it large;
from `THREAD_MESSAGES` messages, checking its chain and cleaning its messages run on a worker thread,
so that an in-process worker never holds the hooks' event loop (the LLM and the embedder already
leave it: the offline provider and the local model compute on threads).

Stores: the conversation and memory repositories of the store port (`echo.ports.store`) and its
`Transactions`: each decision (touch, insert, the window's record, the indexed version) is one
transaction, undone whole when a step inside it fails (the vector write, say), on PostgreSQL and in
memory alike; the worker builds them from the tenant's `Repositories` (`handlers.builtin_registry`).

Failures: LLM, embedder or vector store down → retried with the queue's backoff (nothing is
written before the decision, and everything after it is idempotent); a store error is retried when
it says a retry may help (`StoreError.retryable`) and dead-letters the job otherwise; a forgotten
user's job finds its row gone and stops (checked under the lock `DELETE /users/{id}` takes too).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Any, TypeVar

import structlog

from echo.adapters.llm import errors as llm_errors
from echo.capabilities import handling
from echo.capabilities.memory import metrics as memory_metrics
from echo.capabilities.memory import payloads
from echo.domain import jobs as domain
from echo.domain.memory import cleaning, collisions, distillation, merging, recall, records, worth
from echo.ports import backends as backends_port
from echo.ports import embeddings as embeddings_base
from echo.ports import llm
from echo.ports import store as store_port
from echo.ports import vectors as vectors_base
from echo.queue import errors
from echo.support import offload

__all__ = ["THREAD_MESSAGES", "DistillHandler", "MemoryBackends", "point_payload"]

log = structlog.get_logger("echo.jobs.distill")
_R = TypeVar("_R")
_Failure = handling.Failure  # a step failed (reason, retryable): see echo.capabilities.handling

THREAD_MESSAGES = 500  # from this many messages in a window, its CPU-bound steps run on a worker thread
_MAX_MERGE_ROUNDS = 5
_DISTILL_OUTPUT_TOKENS = 2048  # a 1000-word summary is about 1,400 tokens, plus the other fields


MemoryBackends = backends_port.Index  # where the handler finds the embedder and the vector store


async def _cpu(size: int, work: Callable[[], _R]) -> _R:
    """`work()`, on a worker thread for `THREAD_MESSAGES` messages or more (module docstring)."""
    if size < THREAD_MESSAGES:
        return work()
    return await offload.to_thread(work)


def point_payload(memory: records.Memory) -> dict[str, Any]:
    """The vector point's payload: seed 000's fields, the provenance (the key of every window it came
    from; the messages of each are in PostgreSQL), and what recall needs without a database read:
    the text, and the sources (hash prefixes of the source messages, ``recall.source_ids``; absent
    when there are too many) by which recall leaves out what the request already holds."""
    sources = recall.source_ids(i for window in memory.provenance for i in window.invariants)
    return {
        "memory_id": memory.memory_id,
        "provenance": [window.key for window in memory.provenance],
        **({"sources": sources} if sources else {}),
        "summary": memory.summary,
        "memory_importance": memory.importance,
        "tags": list(memory.tags),
        "timestamp": memory.updated_at,
        "version": memory.version,
    }


def fact_key(window_key: str, index: int) -> str:
    """The key of a window's ``index``-th fact (64 hex digits, like a window's): what its memory's
    provenance and the window record of that fact are keyed by, so a retried job writes each once."""
    return hashlib.sha256(f"{window_key}:{index}".encode()).hexdigest()


def _fact_ref(spec: payloads.DistillPayload, index: int) -> records.WindowRef:
    return records.WindowRef(spec.chat_id, fact_key(spec.key, index), spec.invariants, spec.message_ids)


def _json_request(
    spec: payloads.DistillPayload,
    system: str,
    user: str,
    schema: dict[str, Any],
    purpose: str,
    temperature: float,
) -> llm.LLMRequest:
    """A request to the distillation model for one JSON object shaped by ``schema``."""
    return llm.LLMRequest(
        model=spec.model,
        messages=[("user", user)],
        system=system,
        temperature=temperature,
        max_output_tokens=_DISTILL_OUTPUT_TOKENS,
        json_schema=schema,
        purpose=purpose,
    )


class DistillHandler:
    """Runs `distill` jobs with the conversation and memory stores and their transactions (the store
    port's: PostgreSQL's or the in-memory ones of one tenant), an LLM, the embedder and vectors."""

    def __init__(
        self,
        conversations: store_port.ConversationStore,
        memories: store_port.MemoryStore,
        transactions: store_port.Transactions,
        llm_factory: Callable[[], llm.LLM],
        backends: MemoryBackends,
    ) -> None:
        self.conversations = conversations
        self.memories = memories
        self.transactions = transactions
        self.backends = backends
        self._llm = handling.LazyLLM(llm_factory)

    async def aclose(self) -> None:
        await self._llm.aclose()
        close = getattr(self.backends, "aclose", None)
        if close is not None:
            await close()

    async def __call__(self, job: domain.Job, spec: payloads.DistillPayload, /) -> None:
        await _cpu(len(spec.invariants), spec.check_chain)
        bound = log.bind(user_id=spec.user_id, chat_id=spec.chat_id, window=spec.key[:12], job_id=job.id)
        started = time.perf_counter()
        try:
            outcomes = await self._distill(job, spec, bound)
        except _Failure as failure:
            memory_metrics.MEMORY_DISTILL_FAILURES.labels(failure.reason).inc()
            bound.warning("distill_failed", reason=failure.reason, error=str(failure), attempt=job.attempts)
            if failure.retryable:
                raise errors.RetryLater(str(failure)) from failure
            raise errors.PermanentJobError(str(failure)) from failure
        except store_port.StoreError as error:
            memory_metrics.MEMORY_DISTILL_FAILURES.labels("store").inc()
            bound.warning("distill_failed", reason="store", error=str(error), attempt=job.attempts)
            if error.retryable:
                raise errors.RetryLater(f"store: {error}") from error
            raise errors.PermanentJobError(f"store: {error}") from error
        if outcomes:
            for outcome in outcomes:
                memory_metrics.MEMORIES.labels(outcome).inc()
            memory_metrics.MEMORY_DISTILL_SECONDS.observe(time.perf_counter() - started)
            bound.info("window_distilled", outcomes=outcomes)

    async def _ready(self) -> tuple[embeddings_base.Embedder, vectors_base.VectorStore]:
        return await handling.ready_backends(self.backends)

    async def _distill(self, job: domain.Job, spec: payloads.DistillPayload, bound: Any) -> list[str]:
        """What the window did: one outcome per memory it made, touched or merged into, or
        ``["discarded"]``; empty when there was nothing (more) to do."""
        if not await self.memories.job_alive(None, job.id):
            bound.info("job_gone", reason="its user was forgotten")
            return []
        done = await self.memories.window_outcome(spec.user_id, spec.key)
        if done is not None:
            outcome, _memory = done
            if outcome != "discarded":
                await self._reindex_facts(spec)
            bound.info("window_seen", outcome=outcome)
            return []
        loaded = await self.conversations.messages(spec.user_id, spec.invariants)
        missing = [key for key in spec.invariants if key not in loaded]
        if missing:
            raise _Failure("missing_input", f"{len(missing)} window messages are not stored", retryable=False)

        def cleaned_window() -> tuple[str | None, str]:
            """The window as the model reads it, or None and why it is not worth distilling."""
            cleaned = cleaning.clean_messages([loaded[key] for key in spec.invariants], spec.file_names)
            if not cleaned:
                return None, "empty"
            if not worth.is_worth_distilling(cleaned):
                return None, "small_talk"
            return cleaning.render(cleaned), ""

        conversation, discarded = await _cpu(len(spec.invariants), cleaned_window)
        if conversation is None:
            return await self._discard(job, spec, discarded)
        model = await self._llm.get()
        distilled, result = await self._distillation(model, spec, conversation)
        if not distilled:
            return await self._discard(job, spec, "model")
        embedder, vectors = await self._ready()
        vectors_of = await self._embed_all(embedder, [fact.summary for fact in distilled])
        outcomes: list[str] = []
        first: str | None = None
        for index, (fact, vector) in enumerate(zip(distilled, vectors_of, strict=True)):
            record = _fact_ref(spec, index)
            made = await self._remember(job, spec, record, fact, vector, model, embedder, vectors, result)
            if made is None:
                continue
            outcomes.append(made)
            if first is None:
                first = await self._fact_memory(spec.user_id, record.key)
        if not outcomes:
            return []
        async with self.transactions.transaction() as connection:  # the window itself: a replay stops early
            await self.memories.user_lock(connection, spec.user_id)
            if await self.memories.job_alive(connection, job.id):
                overall = "created" if "created" in outcomes else outcomes[0]
                await self.memories.record_window(connection, spec.user_id, spec.window, overall, first)
        return outcomes

    async def _remember(
        self,
        job: domain.Job,
        spec: payloads.DistillPayload,
        record: records.WindowRef,
        distilled: records.Distilled,
        vector: list[float],
        model: llm.LLM,
        embedder: embeddings_base.Embedder,
        vectors: vectors_base.VectorStore,
        result: llm.LLMResult | None,
    ) -> str | None:
        """One fact of the window, by the seed's policy: touch, merge or insert (None: done already)."""

        def mergeable(old: str) -> bool:
            # Offline, a merge that cannot hold both facts would push the old one out of recall (it
            # stays only in the history): the new fact is then a memory of its own. A model condenses.
            return model.provider_name != "offline" or merging.offline_merge_fits(old, distilled.summary)

        for _ in range(_MAX_MERGE_ROUNDS):
            decided = await self._decide_or_write(
                job, spec, record, distilled, vector, vectors, result, mergeable
            )
            if decided is None or isinstance(decided, str):
                return decided
            target, expected = decided
            merged = await self._merge(model, spec, record, target, distilled, embedder, vectors, expected)
            if merged:
                return collisions.Action.MERGE.value
            memory_metrics.MEMORY_MERGE_CONFLICTS.inc()
            log.info("merge_conflict", memory=target.id, window=spec.key[:12])
        raise _Failure("conflict", f"{_MAX_MERGE_ROUNDS} merge rounds lost to other workers", retryable=True)

    async def _fact_memory(self, user_id: str, fact_key: str) -> str | None:
        done = await self.memories.window_outcome(user_id, fact_key)
        return done[1] if done is not None else None

    async def _reindex_facts(self, spec: payloads.DistillPayload) -> None:
        """Make the vector index hold the latest version of every memory the window's facts wrote."""
        for index in range(distillation.MAX_FACTS):
            done = await self.memories.window_outcome(spec.user_id, _fact_ref(spec, index).key)
            if done is None:
                break
            if done[1] is not None:
                await self._reindex(spec.user_id, done[1])

    async def _discard(self, job: domain.Job, spec: payloads.DistillPayload, reason: str) -> list[str]:
        memory_metrics.MEMORY_DISCARDED.labels(reason).inc()
        async with self.transactions.transaction() as connection:
            await self.memories.user_lock(connection, spec.user_id)
            if not await self.memories.job_alive(connection, job.id):
                return []
            recorded = await self.memories.record_window(
                connection, spec.user_id, spec.window, "discarded", reason=reason
            )
        return ["discarded"] if recorded else []

    async def _generate(self, model: llm.LLM, request: llm.LLMRequest) -> llm.LLMResult:
        try:
            return await model.generate(request)
        except llm_errors.InvalidJSON:
            raise
        except llm_errors.LLMError as error:
            raise _Failure("llm", f"distillation model failed: {error}", retryable=True) from error

    async def _distillation(
        self, model: llm.LLM, spec: payloads.DistillPayload, conversation: str
    ) -> tuple[list[records.Distilled], llm.LLMResult | None]:
        system, user = distillation.distillation_prompt(conversation)
        answer: object = None
        for attempt in range(2):
            request = _json_request(spec, system, user, distillation.DISTILLATION_SCHEMA, "distill", 0.2)
            try:
                result = await self._generate(model, request)
                answer = result.parsed
                return distillation.parse(answer), result
            except llm_errors.InvalidJSON as error:
                answer, problems = error.text or str(error), [f"(answer): not JSON ({error.message})"]
            except distillation.InvalidDistillation as error:
                problems = error.problems
            if attempt == 0:
                system, user = distillation.repair_prompt(
                    conversation, distillation.raw_text(answer), problems
                )
        raise _Failure(
            "invalid",
            f"invalid distillation after one repair: {'; '.join(problems)}; raw answer: "
            f"{distillation.raw_text(answer)[:2000]}",
            retryable=False,
        )

    async def _embed(self, embedder: embeddings_base.Embedder, text: str) -> list[float]:
        return (await self._embed_all(embedder, [text]))[0]

    async def _embed_all(self, embedder: embeddings_base.Embedder, texts: list[str]) -> list[list[float]]:
        try:
            return list(await embedder.embed(texts))
        except embeddings_base.EmbeddingError as error:
            raise _Failure("embedding", f"embedding failed: {error}", retryable=error.retryable) from error

    async def _decide_or_write(
        self,
        job: domain.Job,
        spec: payloads.DistillPayload,
        record: records.WindowRef,
        distilled: records.Distilled,
        vector: list[float],
        vectors: vectors_base.VectorStore,
        result: llm.LLMResult | None,
        mergeable: Callable[[str], bool],
    ) -> str | tuple[records.Memory, int] | None:
        """Under the user's lock: touch or insert and return the outcome, or return the memory to
        merge into and its version (the merge happens outside the lock; a memory that `mergeable`
        refuses is not merged into: the new fact is inserted); None when there is nothing to do (the
        user was forgotten, or another delivery of the window did it)."""
        async with self.transactions.transaction() as connection:
            await self.memories.user_lock(connection, spec.user_id)
            if not await self.memories.job_alive(connection, job.id):
                return None
            done = await self.memories.window_outcome(spec.user_id, record.key, connection=connection)
            if done is not None:
                return None
            hits = await self._search(vectors, vector, spec.user_id)
            decision = collisions.decide(
                (hits[0].id, hits[0].score) if hits else None,
                similarity_threshold=spec.similarity_threshold,
                exact_match_threshold=spec.exact_match_threshold,
            )
            if decision.action is not collisions.Action.INSERT:
                assert decision.target is not None
                row = await self.memories.get(spec.user_id, decision.target, connection=connection)
                if row is None:  # a point without its row (deleted meanwhile): drop it and decide again
                    await self._vectors(
                        vectors.delete(vectors_base.Kind.MEMORY, [decision.target], user_id=spec.user_id)
                    )
                    decision = collisions.Decision(collisions.Action.INSERT, None, decision.score)
                elif decision.action is collisions.Action.MERGE and not mergeable(row.memory.summary):
                    log.info("merge_would_drop", memory=row.memory.id, window=spec.key[:12], kept="both")
                    decision = collisions.Decision(collisions.Action.INSERT, None, decision.score)
                elif decision.action is collisions.Action.MERGE:
                    return row.memory, row.memory.version
                else:
                    await self.memories.touch(connection, spec.user_id, row.memory.id, record)
                    await self.memories.record_window(
                        connection, spec.user_id, record, "touched", row.memory.id
                    )
                    touched = await self._row(connection, spec.user_id, row.memory.id)
                    await self._write_point(vectors, touched, None, connection)
                    return collisions.Action.TOUCH.value
            memory_id = store_port.memory_key(spec.user_id, record.key)
            await self.memories.insert(
                connection,
                spec.user_id,
                memory_id,
                distilled,
                record,
                provider=result.provider if result is not None else "unknown",
                model=result.model if result is not None else spec.model,
            )
            await self.memories.record_window(connection, spec.user_id, record, "created", memory_id)
            created = await self._row(connection, spec.user_id, memory_id)
            await self._write_point(vectors, created, vector, connection)
            return collisions.Action.INSERT.value

    async def _row(self, connection: store_port.Connection, user_id: str, memory_id: str) -> records.Memory:
        row = await self.memories.get(user_id, memory_id, connection=connection)
        if row is None:  # pragma: no cover - written in this very transaction
            raise _Failure("missing_input", f"memory {memory_id} vanished", retryable=True)
        return row.memory

    async def _search(
        self, vectors: vectors_base.VectorStore, vector: list[float], user_id: str
    ) -> list[vectors_base.Hit]:
        return await self._vectors(vectors.search(vectors_base.Kind.MEMORY, vector, user_id=user_id, limit=1))

    async def _vectors(self, call: Any) -> Any:
        try:
            return await call
        except vectors_base.DimensionMismatch as error:
            raise _Failure("vectors", str(error), retryable=False) from error
        except vectors_base.VectorStoreError as error:
            raise _Failure("vectors", f"vector store failed: {error}", retryable=True) from error

    async def _write_point(
        self,
        vectors: vectors_base.VectorStore,
        memory: records.Memory,
        vector: list[float] | None,
        connection: store_port.Connection,
    ) -> None:
        """Write the memory's point (its vector, or the stored one when None) and mark its version."""
        if vector is None:
            found = await self._vectors(
                vectors.retrieve(
                    vectors_base.Kind.MEMORY, [memory.id], user_id=memory.user_id, with_vectors=True
                )
            )
            if not found or found[0].vector is None:
                raise _Failure("vectors", f"memory {memory.id} has no vector to update", retryable=True)
            vector = list(found[0].vector)
        point = vectors_base.Point(
            id=memory.id,
            vector=vector,
            user_id=memory.user_id,
            chat_id=memory.chat_id,
            payload=point_payload(memory),
            text=" ".join([memory.summary, *memory.tags]),  # the lexical side of hybrid recall
        )
        await self._vectors(vectors.upsert(vectors_base.Kind.MEMORY, [point]))
        await self.memories.mark_indexed(memory.user_id, memory.id, memory.version, connection=connection)

    async def _merge(
        self,
        model: llm.LLM,
        spec: payloads.DistillPayload,
        record: records.WindowRef,
        target: records.Memory,
        distilled: records.Distilled,
        embedder: embeddings_base.Embedder,
        vectors: vectors_base.VectorStore,
        expected: int,
    ) -> bool:
        """Merge the new memory into ``target`` (version ``expected``); False when another worker
        changed it first (the caller decides again)."""
        text = await self._merged_text(model, spec, target.summary, distilled.summary)
        vector = await self._embed(embedder, text)
        version = await self.memories.merge(
            spec.user_id,
            target.id,
            expected_version=expected,
            summary=text,
            importance=collisions.merged_importance(target.importance, distilled.importance),
            tags=collisions.merged_tags(target.tags, distilled.tags),
            window=record,
        )
        if version is None:
            return False
        async with self.transactions.transaction() as connection:
            await self.memories.user_lock(connection, spec.user_id)
            current = await self._row(connection, spec.user_id, target.id)
            if current.version == version:  # a later merge writes its own point
                await self._write_point(vectors, current, vector, connection)
        return True

    async def _merged_text(self, model: llm.LLM, spec: payloads.DistillPayload, old: str, new: str) -> str:
        if model.provider_name == "offline":
            return merging.offline_merge(old, new)
        system, user = merging.merge_prompt(old, new)
        request = _json_request(spec, system, user, merging.MERGE_SCHEMA, "merge", 0.1)
        for attempt in range(2):
            try:
                result = await self._generate(model, request)
                return merging.parse_merge(result.parsed)
            except (llm_errors.InvalidJSON, distillation.InvalidDistillation) as error:
                if attempt:  # a model that cannot merge within a memory's size: the offline merge does
                    memory_metrics.MEMORY_DISTILL_FAILURES.labels("invalid_merge").inc()
                    log.warning("merge_answer_invalid", error=str(error), fallback="offline merge")
        return merging.offline_merge(old, new)

    async def _reindex(self, user_id: str, memory_id: str) -> None:
        """Make the vector index hold the memory's latest version (after a crash between writes)."""
        row = await self.memories.get(user_id, memory_id)
        if row is None or row.indexed_version >= row.memory.version:
            return
        embedder, vectors = await self._ready()
        vector = await self._embed(embedder, row.memory.summary)
        async with self.transactions.transaction() as connection:
            await self.memories.user_lock(connection, user_id)
            current = await self._row(connection, user_id, memory_id)
            if current.version == row.memory.version:
                await self._write_point(vectors, current, vector, connection)
