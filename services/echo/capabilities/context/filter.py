"""`echo_context` (seed 000, filter 1, new_context_filter v7.18): the draft of the turn on the inlet,
secret masking on the outlet.

Inlet, on the latest user message, under `INLET_DEADLINE_MS` (past it, the hook answers the body
unchanged and Open WebUI handles the files itself):

1. Ordered multimodal parts: a `content` list (text and pasted `image_url` parts) is kept in its
   order; every `data:` image is decoded, sniffed and size-checked (`echo.domain.attachments.parts`); a part
   that fails is replaced in place by a note saying why.
2. Attached files (`echo.capabilities.context.files`): inline text, native parts, or the ephemeral RAG
   with a `map_reduce` job; each gets its `<smart_context>` block; handled files leave `files`.
3. The AEC block (`<environnement_contexte>`, `echo.domain.aec`): ECHO's version, the model placeholders
   (`##MODEL_ID##` / `##MODEL_ORIGIN##`, resolved by the `echo.*` pipe; for other models the body's
   model id is written in directly), the user's name, date and time, location and timezone from Open
   WebUI's user and `metadata.variables` (valve defaults otherwise), and the chat's registries read
   from the store (the backends' `attachments` and `registries`, `echo.ports.store`); empty ones are
   omitted, and a store that fails (or none) leaves them out rather than the block.
4. The blocks go in front of the user's text, in the same turn (the hash chain ignores them, so they
   never accumulate in history); native parts go after the user's parts.

Open WebUI's background tasks (titles, tags, queries) are left alone. A status line says what was
done with each file, and why a file was left to Open WebUI.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

import structlog

import echo
from echo.capabilities import base
from echo.capabilities import events as events_module
from echo.capabilities.compression import costs as compression_costs
from echo.capabilities.context import files as context_files
from echo.capabilities.context import metrics as context_metrics
from echo.capabilities.masking import filter as masking_filter
from echo.config import valves as valves_module
from echo.domain import aec, shadow
from echo.domain.attachments import parts as parts_module
from echo.ports import store as store_port
from echo.support import offload

__all__ = ["ContextFilter"]

log = structlog.get_logger("echo.filters.context")

PIPE_PREFIX = "echo."


def _last_user(messages: list[Any]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, dict) and message.get("role") == "user":
            return index
    return None


def _compose(content: object, leading: list[str], trailing: list[dict[str, Any]]) -> object:
    """The user message's new content: the blocks first, then the user's own parts, then native parts."""
    if not leading and not trailing:
        return content
    head = "\n\n".join(leading)
    if isinstance(content, str) and not trailing:
        return f"{head}\n\n{content}" if head else content
    own: list[Any] = (
        list(content)
        if isinstance(content, list)
        else ([{"type": "text", "text": content}] if content else [])
    )
    return ([{"type": "text", "text": head}] if head else []) + own + trailing


def _file_entry(found: store_port.Attachment) -> aec.FileEntry:
    statut = found.mode if found.status == "ready" else f"{found.mode}:{found.status}"
    return aec.FileEntry(found.filename, found.source_id, found.mime_type, statut, found.source_id)


def _without(files: object, taken: set[str]) -> object:
    if not isinstance(files, list):
        return files
    return [f for f in files if not (isinstance(f, Mapping) and f.get("id") in taken)]


class ContextFilter:
    id = "echo_context"
    name = "ECHO context"
    priority = 0
    description = (
        "Inlet (seed 000, filter 1): pasted images kept in order and checked; attached files routed by"
        " type and size — small text inline, media as native parts, large files to an ephemeral RAG with"
        " a map-reduce summary and the search_session_context tool. Outlet: masks leaked API keys and"
        " private keys in assistant messages (Google, OpenAI, Anthropic, AWS, GitHub, Slack, PEM)."
    )

    def __init__(
        self,
        on_masked: masking_filter.OnMasked,
        *,
        backends: base.BackendsProvider | None = None,
    ) -> None:
        self._on_masked = on_masked
        self._backends = backends or base.no_backends
        self.files = context_files.Files(self._backends)

    @staticmethod
    def _valves(ctx: base.HookContext) -> valves_module.ContextValves:
        found = ctx.valves
        return found if isinstance(found, valves_module.ContextValves) else valves_module.ContextValves()

    async def inlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        messages = body.get("messages")
        if ctx.ids.task or not isinstance(messages, list):
            return body
        index = _last_user(messages)
        if index is None:
            return body
        settings = self._valves(ctx)
        message = dict(messages[index])
        content = message.get("content")
        leading: list[str] = []
        trailing: list[dict[str, Any]] = []
        if isinstance(content, list):
            checked = parts_module.checked_parts(content, max_image_bytes=settings.MAX_NATIVE_FILE_SIZE)
            content = list(checked.parts)
            self._count_images(checked)
            for problem in checked.problems:
                ctx.events.append(events_module.StatusEvent(f"{self.name}: {problem}", "warning"))
        items = context_files.file_items(body)
        taken: set[str] = set()
        if items and ctx.ids.user_id:
            turn = context_files.Turn(
                user_id=ctx.ids.user_id,
                chat_id=ctx.ids.chat_id or "",
                pipe_model=str(body.get("model", "")).startswith(PIPE_PREFIX),
                settings=settings,
                deadline=ctx.deadline,
            )
            outcomes = await self.files.handle_all(items, turn)
            for outcome in outcomes:
                if outcome.block:
                    leading.append(outcome.block)
                if outcome.part:
                    trailing.append(outcome.part)
                if outcome.taken:
                    taken.add(outcome.file_id)
                if outcome.note:
                    ctx.events.append(events_module.StatusEvent(f"{self.name}: {outcome.note}", "info"))
            log.info(
                "files_routed",
                chat_id=ctx.ids.chat_id,
                modes=[o.mode for o in outcomes],
                left=[o.filename for o in outcomes if not o.taken],
            )
        if settings.ENABLE_AEC:
            leading.insert(0, await self._aec_block(body, ctx, settings))
        new_content = _compose(content, leading, trailing)
        if new_content is message.get("content") and not taken:
            return body
        message["content"] = new_content
        new_messages = list(messages)
        new_messages[index] = message
        new_body = {**body, "messages": new_messages}
        if str(body.get("model", "")).startswith(PIPE_PREFIX):  # it walks every message: off the loop
            new_body[shadow.ECHO_CTX_KEY] = await compression_costs.off_loop(
                len(messages), lambda stop: self._as_stored(body, ctx)
            )
        if taken:
            new_body["files"] = _without(body.get("files"), taken)
            metadata = body.get("metadata")
            if isinstance(metadata, Mapping) and "files" in metadata:
                new_body["metadata"] = {**metadata, "files": _without(metadata.get("files"), taken)}
        return new_body

    @staticmethod
    def _as_stored(body: Mapping[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        """For the `echo.*` pipe's shadow: the user message as Open WebUI stores it and later turns send
        it (before the parts added or corrected here), so this turn's rows are found again. Other
        providers never get this key: Open WebUI passes unknown top-level keys on to the model."""
        earlier = body.get(shadow.ECHO_CTX_KEY)
        context = dict(earlier) if isinstance(earlier, Mapping) else {}
        current = shadow.from_inlet(body, ctx.user).current
        if current is not None:
            context.update(user_position=current.position, user_invariant=current.invariant)
        return context

    async def _aec_block(
        self, body: Mapping[str, Any], ctx: base.HookContext, settings: valves_module.ContextValves
    ) -> str:
        files: list[aec.FileEntry] = []
        plans: list[aec.PlanEntry] = []
        codex: list[aec.CodexEntry] = []
        store = self._backends().store
        user_id, chat_id = ctx.ids.user_id, ctx.ids.chat_id
        if store is not None and user_id and chat_id:
            # Both reads at once: the turn waits for one round trip, not three. Each ends (its error
            # returned, not raised) before the block goes on: no read is left running.
            attached, snapshot = await asyncio.gather(
                store.attachments.of_chat(user_id, chat_id),
                store.registries.snapshot(user_id, chat_id),
                return_exceptions=True,
            )
            if not isinstance(attached, BaseException) and not isinstance(snapshot, BaseException):
                files = [_file_entry(a) for a in attached]
                plans, codex = snapshot
            else:
                error = cast(BaseException, attached if isinstance(attached, BaseException) else snapshot)
                if not isinstance(error, store_port.StoreError):
                    raise error
                log.warning(
                    "aec_registries_failed", chat_id=chat_id, error=str(error), returned="block without"
                )
        metadata = body.get("metadata")
        environment = aec.environment_from_request(
            ctx.user,
            metadata if isinstance(metadata, Mapping) else None,
            datetime.now(UTC),
            aec.AecDefaults.from_valves(settings, echo.__version__),
            files=files,
            plans=plans,
            codex=codex,
        )
        block = aec.render_block(environment)
        model = str(body.get("model") or "")
        if model and not model.startswith(PIPE_PREFIX):  # no pipe will resolve them: say the model here
            quoted = aec.quoted(model)
            block = block.replace(f'"{aec.MODEL_ID_PLACEHOLDER}"', quoted)
            block = block.replace(f'"{aec.MODEL_ORIGIN_PLACEHOLDER}"', quoted)
        return block

    @staticmethod
    def _count_images(checked: parts_module.CheckedParts) -> None:
        refused = len(checked.problems)
        kept = checked.images - checked.corrected
        for outcome, count in (("kept", kept), ("corrected", checked.corrected), ("refused", refused)):
            if count:
                context_metrics.CONTEXT_IMAGE_PARTS.labels(outcome).inc(count)

    async def outlet(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or len(messages) < compression_costs.OFFLOAD_MESSAGES:
            return await masking_filter.mask_and_report(
                body, self._on_masked, deadline=ctx.deadline, events=ctx.events, name=self.name
            )
        # A long chat: collecting and putting back its texts walks every message, so the whole
        # masking runs on a worker thread (its own loop; it stops by the deadline as on this one).
        events: list[events_module.StatusEvent] = []
        masked = await offload.to_thread(
            lambda: asyncio.run(
                masking_filter.mask_and_report(
                    body, self._on_masked, deadline=ctx.deadline, events=events, name=self.name
                )
            )
        )
        ctx.events.extend(events)
        return masked

    def fail_closed(self, body: dict[str, Any], ctx: base.HookContext) -> dict[str, Any]:
        return masking_filter.withhold_suspect(body, self._on_masked)
