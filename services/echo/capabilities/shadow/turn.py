"""One call of an `echo.<model>` pipe: suture, Gemini, ECHO's own tools, archive.

``PipeTurn.prepare`` hashes the history (``echo.domain.shadow.points``), reads the shadow's points and
payloads (one statement, then the payloads not cached), restores what Open WebUI dropped
(``echo.domain.shadow.suture``), converts to Gemini contents, records the user's turn, and declares Open
WebUI's tools and ECHO's own (``echo.capabilities.shadow.server_tools``) to Gemini. ``open`` starts the first
Gemini stream (429/5xx retried with backoff honouring Retry-After); ``events`` yields what to send:
text and thought deltas, then either the end of the answer or the tool calls Open WebUI must run.
ECHO's own tool calls are run here, at most ``max_tool_rounds`` rounds, then Gemini is asked to answer
without tools. ``archive`` stores the rich turn, and must finish before the last event reaches Open
WebUI: after a tool call it sends its follow-up at once.

The shadow is an enhancement: when it cannot be read or written (store down, too slow, a stored form
that cannot be rebuilt) the call goes on with the plain conversion; it is logged and counted.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import structlog

from echo.adapters.llm import gemini_chat, retries
from echo.capabilities.masking import filter as masking_filter
from echo.capabilities.shadow import metrics as shadow_metrics
from echo.capabilities.shadow import server_tools as server_tools_module
from echo.domain import chain, openai_to_gemini, shadow
from echo.domain.shadow.parts import ContentDict, JournalEntry, PartDict
from echo.errors import EchoError
from echo.ports import backends as backends_port
from echo.ports import store as store_port
from echo.support import metrics

__all__ = ["PipeOptions", "PipeTurn", "TurnDelta"]

log = structlog.get_logger("echo.pipe")
_T = TypeVar("_T")
_POINTS = shadow.PointsMemo()
"""Each chat's previous call, so a new turn hashes only the messages it adds."""
ROUND_LIMIT_ERROR = "ECHO's limit of tool rounds for one answer is reached: answer with what you have."


@dataclass(frozen=True)
class PipeOptions:
    """``max_tool_rounds``: rounds of ECHO's own tools per call; ``shadow_deadline_s``: the longest a
    shadow read or write may take before the call goes on without it; ``retry``: Gemini retries."""

    max_tool_rounds: int = 5
    shadow_deadline_s: float = 1.0
    retry: retries.RetryPolicy = field(default_factory=retries.RetryPolicy)


@dataclass(frozen=True)
class TurnDelta:
    """What to send next: text, thoughts, or the end (``finish_reason``, OpenAI ``tool_calls``, usage)."""

    content: str = ""
    reasoning: str = ""
    tool_calls: tuple[dict[str, Any], ...] = ()
    finish_reason: str | None = None
    usage: dict[str, int] | None = None


def _add_usage(total: dict[str, int], usage: Mapping[str, int] | None) -> None:
    for key, value in (usage or {}).items():
        total[key] = total.get(key, 0) + value


def _strip_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """The message without the blocks the filters write fresh every turn."""
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": shadow.strip_per_turn_blocks(content)}
    if isinstance(content, list):
        parts = [
            {**p, "text": shadow.strip_per_turn_blocks(p["text"])}
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            else p
            for p in content
        ]
        return {**message, "content": parts}
    return dict(message)


async def _joined(
    first: gemini_chat.ChatDelta, rest: AsyncIterator[gemini_chat.ChatDelta]
) -> AsyncIterator[gemini_chat.ChatDelta]:
    yield first
    async for delta in rest:
        yield delta


class PipeTurn:
    """One `/chat/completions` call of a pipe model (see the module docstring)."""

    def __init__(
        self,
        *,
        chat: gemini_chat.GeminiChat,
        payload: Mapping[str, Any],
        store: store_port.ShadowStore | None,
        tools: server_tools_module.ServerTools,
        backends: backends_port.Backends | None,
        options: PipeOptions,
        user_id: str | None,
        chat_id: str | None,
    ) -> None:
        self.chat = chat
        self.payload = payload
        self.options = options
        self.pipe_model: str = payload["model"]
        self.model = openai_to_gemini.gemini_model_id(self.pipe_model)
        self.context = shadow.EchoContext.from_json(payload.get(shadow.ECHO_CTX_KEY))
        # Open WebUI's user (``echo.entrypoints.http.pipe``), never ``echo_ctx.user_id``: that is body
        # content.
        self.user_id = user_id
        self.chat_id = chat_id or self.context.chat_id or ""
        use_shadow = store is not None and bool(self.user_id) and self.context.task is None
        self.store = store if use_shadow else None
        self._tools = tools
        self._backends = backends
        self.started = time.perf_counter()
        self.contents: list[ContentDict] = []
        self.config: dict[str, Any] = {}
        self.produced: list[ContentDict] = []
        self.journal: list[JournalEntry] = []
        self._calls_at: dict[tuple[int, int], int] = {}
        self._results_at: dict[tuple[int, int], int] = {}
        self._openwebui_calls: list[dict[str, Any]] = []
        self._points: tuple[shadow.Point, ...] = ()
        self._echo_tools: dict[str, server_tools_module.ServerTool] = {}
        self._first: tuple[gemini_chat.ChatDelta, AsyncIterator[gemini_chat.ChatDelta]] | None = None
        self._archived = False
        self.masked: Counter[str] = Counter()
        """Secrets masked in the arguments of the tool calls handed to Open WebUI, per kind."""

    # -- before the call ---------------------------------------------------------------------------

    async def prepare(self) -> None:
        """Suture and convert; ``ValueError`` naming the field for a malformed body (nothing written)."""
        raw = self.payload["messages"]
        origin = self.context.model or self.pipe_model
        messages = shadow.resolve_placeholders(raw, model_id=self.model, model_origin=origin)
        if self.chat_id and self.user_id:
            self._points = _POINTS.points((self.user_id, self.chat_id), raw, current=self.context.current)
        else:
            self._points = shadow.conversation_points(raw, current=self.context.current)
        last = self._points[-1] if self._points else None
        current = last.index if last is not None and last.role == "user" else None
        suture = await self._restore(messages, current)
        contents, system = openai_to_gemini.to_gemini_contents(messages, restored=suture.restored)
        placeholders = shadow.sign_current_turn(contents)
        if placeholders:
            shadow_metrics.SHADOW_PLACEHOLDER_SIGNATURES.inc(placeholders)
        self.contents = contents
        config: dict[str, Any] = dict(
            openai_to_gemini.to_gemini_config(self.payload, system_instruction=system)
        )
        declarations: list[Any] = list(openai_to_gemini.to_gemini_tools(self.payload.get("tools")))
        declared = {declaration["name"] for declaration in declarations}
        if self.user_id and self.context.task is None:
            for tool in self._tools:
                if tool.name not in declared and (self._backends is not None or not tool.needs_backends):
                    self._echo_tools[tool.name] = tool
                    declarations.append(tool.declaration())
        if declarations:
            config["tools"] = [{"function_declarations": declarations}]
        self.config = config
        if current is not None and last is not None:
            await self._record_user(last, raw[current], messages[current])

    async def _restore(self, messages: list[Mapping[str, Any]], current: int | None) -> shadow.Suture:
        found: dict[str, shadow.StoredPoint] = {}
        payloads: dict[str, shadow.Payload] = {}
        if self.store is not None and self.user_id:
            store, user_id = self.store, self.user_id
            hashes = [
                p.cumulative for p in self._points if p.index != current and p.role in ("user", "assistant")
            ]

            async def read() -> None:
                found.update(await store.stored_points(user_id, hashes))
                refs = [ref for point in found.values() for ref in point.refs]
                payloads.update(await store.payloads(user_id, refs))

            started = time.perf_counter()
            if not await self._shadow_step("restore", read):
                found.clear()
                payloads.clear()
            shadow_metrics.PIPE_LATENCY.labels(self.pipe_model, "restore").observe(
                time.perf_counter() - started
            )
        suture = shadow.plan_suture(messages, self._points, found, payloads, current_index=current)
        for kind in shadow.KINDS:
            if suture.hits.get(kind):
                shadow_metrics.SHADOW_SUTURE.labels(kind, "hit").inc(suture.hits[kind])
            if suture.misses.get(kind):
                shadow_metrics.SHADOW_SUTURE.labels(kind, "miss").inc(suture.misses[kind])
        if suture.unreadable:
            shadow_metrics.SHADOW_FAILURES.labels("restore", "unreadable").inc(suture.unreadable)
            log.warning("shadow_unreadable", points=suture.unreadable, chat_id=self.chat_id)
        shadow_metrics.SHADOW_RESTORED_BYTES.inc(suture.restored_bytes)
        return suture

    async def _record_user(
        self, point: shadow.Point, received: Mapping[str, Any], resolved: Mapping[str, Any]
    ) -> None:
        store, user_id = self.store, self.user_id
        if store is None or not user_id:
            return
        stripped = _strip_message(resolved)
        record = shadow.user_record(
            point,
            received_invariant=shadow.message_invariant(received),
            received_text=chain.message_text(received.get("content")),
            parts=openai_to_gemini.message_parts(stripped),
            chat_id=self.chat_id,
            model=self.model,
            added=shadow.archive.added_parts(received.get("content")),
        )
        started = time.perf_counter()
        await self._shadow_step("record", lambda: store.record(user_id, record))
        shadow_metrics.PIPE_LATENCY.labels(self.pipe_model, "record").observe(time.perf_counter() - started)

    async def _shadow_step(self, stage: str, step: Callable[[], Awaitable[Any]]) -> bool:
        """Run a shadow read or write under its deadline; False (logged, counted) when it failed."""
        try:
            async with asyncio.timeout(self.options.shadow_deadline_s):
                await step()
        except TimeoutError:
            shadow_metrics.SHADOW_FAILURES.labels(stage, "timeout").inc()
            log.warning("shadow_failed", stage=stage, reason="timeout", chat_id=self.chat_id)
            return False
        except EchoError as error:
            shadow_metrics.SHADOW_FAILURES.labels(stage, "store").inc()
            log.warning("shadow_failed", stage=stage, reason="store", error=str(error), chat_id=self.chat_id)
            return False
        return True

    # -- the call ----------------------------------------------------------------------------------

    async def _open_step(
        self, config: Mapping[str, Any]
    ) -> tuple[gemini_chat.ChatDelta, AsyncIterator[gemini_chat.ChatDelta]]:
        contents = [*self.contents, *self.produced]

        async def attempt() -> tuple[gemini_chat.ChatDelta, AsyncIterator[gemini_chat.ChatDelta]]:
            stream = self.chat.stream_contents(self.model, contents, config)
            return await anext(stream), stream

        def on_retry(error: gemini_chat.LLMError, attempt_number: int, wait_s: float) -> None:
            metrics.LLM_RETRIES.labels("gemini", "chat", str(error.status or "transport")).inc()
            log.info("pipe_retry", status=error.status, attempt=attempt_number, wait_s=round(wait_s, 3))

        return await retries.call_with_retries(attempt, self.options.retry, on_retry=on_retry)

    async def open(self) -> None:
        """Start the first Gemini stream; its ``LLMError`` (after retries) surfaces here, before any byte."""
        opened = time.perf_counter()
        self._first = await self._open_step(self.config)
        now = time.perf_counter()
        metrics.LLM_LATENCY.labels("gemini", self.pipe_model, "chat").observe(now - opened)
        shadow_metrics.PIPE_LATENCY.labels(self.pipe_model, "first_token").observe(now - self.started)

    async def events(self) -> AsyncIterator[TurnDelta]:
        """The answer, step by step (see the module docstring); ``LLMError`` mid-answer propagates."""
        assert self._first is not None, "open() first"
        first, stream = self._first
        usage: dict[str, int] = {}
        rounds = 0
        config = self.config
        while True:
            step = shadow.StepBuilder()
            finish: str | None = None
            async for delta in _joined(first, stream):
                for part in delta.parts:
                    step.add(part)
                if delta.content or delta.reasoning:
                    yield TurnDelta(content=delta.content, reasoning=delta.reasoning)
                finish = delta.finish_reason or finish
                _add_usage(usage, delta.usage)
            content_index = len(self.produced)
            self.produced.append(step.content)
            calls = step.function_calls
            if not calls or rounds > self.options.max_tool_rounds:  # the latter: calls despite mode NONE
                yield TurnDelta(finish_reason=finish or "stop", usage=usage or None)
                return
            echo_calls, openwebui_calls = self._journal_calls(content_index, calls)
            limit = bool(echo_calls) and not openwebui_calls and rounds >= self.options.max_tool_rounds
            if echo_calls:
                await self._run_echo_calls(echo_calls, limit=limit)
            if openwebui_calls:
                yield TurnDelta(
                    tool_calls=tuple(openwebui_calls), finish_reason="tool_calls", usage=usage or None
                )
                return
            rounds += 1
            if limit:
                config = {**self.config, "tool_config": {"function_calling_config": {"mode": "NONE"}}}
            first, stream = await self._open_step(config)

    def _journal_calls(
        self, content_index: int, calls: list[tuple[int, shadow.parts.FunctionCallDict]]
    ) -> tuple[list[JournalEntry], list[dict[str, Any]]]:
        echo_calls: list[JournalEntry] = []
        openwebui_calls: list[dict[str, Any]] = []
        for part_index, call in calls:
            executor: Literal["echo", "openwebui"] = (
                "echo" if call["name"] in self._echo_tools else "openwebui"
            )
            entry = JournalEntry(
                call_index=len(self.journal),
                call_id=f"call_{uuid.uuid4().hex[:24]}",
                name=call["name"],
                arguments=call["args"],
                executor=executor,
            )
            self.journal.append(entry)
            self._calls_at[(content_index, part_index)] = entry.call_index
            if executor == "echo":
                echo_calls.append(entry)
            else:  # shown to the user and stored by Open WebUI: masked here, so the archive agrees
                args, masked = masking_filter.mask_value(call["args"])
                self.masked.update(masked)
                arguments = json.dumps(args, ensure_ascii=False)
                openwebui_calls.append(
                    {
                        "id": entry.call_id,
                        "type": "function",
                        "function": {"name": call["name"], "arguments": arguments},
                    }
                )
                shadow_metrics.PIPE_TOOL_CALLS.labels("openwebui", "returned").inc()
        self._openwebui_calls.extend(openwebui_calls)
        return echo_calls, openwebui_calls

    async def _run_echo_calls(self, calls: list[JournalEntry], *, limit: bool) -> None:
        """Run ECHO's calls (or, past the round limit, answer them with the limit), journal their results
        and add them as one user content."""
        parts: list[PartDict] = []
        content_index = len(self.produced)
        for entry in calls:
            if limit:
                response: dict[str, Any] = {"error": ROUND_LIMIT_ERROR}
                outcome = "limit"
            else:
                tool = self._echo_tools[entry.name]
                response = await tool.call(self.user_id or "", entry.arguments, self._backends)
                outcome = "error" if "error" in response else "ok"
            shadow_metrics.PIPE_TOOL_CALLS.labels("echo", outcome).inc()
            log.info("pipe_tool_call", tool=entry.name, outcome=outcome, chat_id=self.chat_id)
            done = JournalEntry(
                entry.call_index, entry.call_id, entry.name, entry.arguments, "echo", response
            )
            self.journal[entry.call_index] = done
            self._results_at[(content_index, len(parts))] = entry.call_index
            parts.append({"function_response": {"name": entry.name, "response": response}})
        self.produced.append({"role": "user", "parts": parts})

    # -- after the call ----------------------------------------------------------------------------

    async def archive(self, answer_text: str) -> None:
        """Store the rich turn: what was produced, keyed by the point of the assistant message Open
        WebUI will store (``answer_text``: the content as streamed, masked). Never raises."""
        store, user_id = self.store, self.user_id
        if self._archived or store is None or not user_id or not self.produced:
            return
        self._archived = True
        record = shadow.model_record(
            self._points[-1] if self._points else None,
            contents=self.produced,
            journal=self.journal,
            calls=self._calls_at,
            results=self._results_at,
            answer_text=answer_text,
            openwebui_calls=self._openwebui_calls,
            chat_id=self.chat_id,
            model=self.model,
        )
        started = time.perf_counter()
        await self._shadow_step("archive", lambda: store.record(user_id, record))
        shadow_metrics.PIPE_LATENCY.labels(self.pipe_model, "archive").observe(time.perf_counter() - started)
