"""What hashing and pricing a request's messages cost echo_compression, cached per process.

Every inlet and outlet needs, for each message, its kind and token cost (`echo.domain.compression.messages`),
and for the turns their chain (`echo.domain.chain`) and atomic groups (`echo.domain.compression.groups`).
Those are
pure functions of the messages, so they are cached:

- per message: token counts by text, kinds and costs by (role, text, protected flag) for messages
  whose content is a string and that make no tool calls, invariant hashes by (role, text, file ids,
  tool calls and call id), chain links by (invariant, parent cumulative hash, message id);
- per request prefix (`Costs.prepare` with a key: the chat and the hook's phase): a new turn repeats
  the whole history before it, so the previous request's results stand for the messages it shares as
  a prefix (compared as dicts, in one C-level list comparison), and only the new messages are worked
  out. The results are those of the uncached functions, which the tests check.

Each cache holds at most `entries` entries (least recently used out first). The per-message ones memoise
pure functions of their key with `functools.lru_cache` (in C, and thread-safe: large chats are
prepared on worker threads, and racing threads at worst compute an entry twice); the prefixes are a
`cachetools.LRUCache` weighed in messages, behind a lock (cachetools caches are not thread-safe).

`off_loop` is how the filters run such work for a large request (`OFFLOAD_MESSAGES` messages or more):
on a worker thread, so the event loop stays free, and abandoned when the hook stops waiting (its
deadline passed): `prepare` given a `stop` check ends at its next `STOP_EVERY` messages with
`Abandoned`, rather than hashing a million messages for an answer no one reads.
"""

from __future__ import annotations

import bisect
import concurrent.futures
import contextvars
import functools
import threading
import typing
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import cachetools

from echo.domain import chain, output_items, tokens
from echo.domain.compression import groups as grp
from echo.domain.compression import messages as msgs
from echo.support import offload

__all__ = [
    "CACHE_ENTRIES",
    "OFFLOAD_MESSAGES",
    "Abandoned",
    "Costs",
    "Prepared",
    "Profile",
    "StopCheck",
    "off_loop",
]

# Per cache (for prefixes: messages held, all chats together): some 50 chats of 2,000 messages. The
# keys are the messages' own texts, which every cache (and the prefixes) share: about 50 MB at 500
# characters a message.
CACHE_ENTRIES = 100_000
# From this many messages, a hook's CPU work runs on a worker thread (about 2 ms of it; below, the
# hop to the thread and back costs more than it frees: 0.5-1 ms at 500 messages on 2 cores).
OFFLOAD_MESSAGES = 2000
STOP_EVERY = 512  # messages between two looks at a `stop` check
_T = TypeVar("_T")
StopCheck = Callable[[], bool]


class Abandoned(Exception):
    """Work on a worker thread stopped because the hook that waited for it gave up."""


def _never() -> bool:
    return False


@functools.cache
def _workers() -> concurrent.futures.ThreadPoolExecutor:
    # Their own threads, as masking has: the default executor also runs embeddings.
    return concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="echo-filters")


async def off_loop(size: int, work: Callable[[StopCheck], _T]) -> _T:
    """`work(stop)`: here when `size` (messages) is below `OFFLOAD_MESSAGES`, else on a worker thread;
    when the caller is cancelled (its deadline), `stop()` turns true, and `work` should end soon."""
    if size < OFFLOAD_MESSAGES:
        return work(_never)
    stop = threading.Event()
    try:
        return await offload.run(_workers(), lambda: work(stop.is_set))
    finally:
        stop.set()  # done, or no longer waited for


# The branch of the request being answered, once prepared: (its messages, unfolded, prepared). The
# filters of one `POST /hooks/outlet` run in one task, so the second to ask (echo_memory after
# echo_compression) finds the first one's work; each request is a task of its own, with its own value.
_BRANCH: contextvars.ContextVar[tuple[Sequence[Any], list[Mapping[str, Any]], Prepared] | None] = (
    contextvars.ContextVar("echo_prepared_branch", default=None)
)


async def prepared_branch(
    costs: Costs, messages: Sequence[Any], key: Hashable | None
) -> tuple[list[Mapping[str, Any]], Prepared] | None:
    """An outlet's messages as the next inlet sends them (`output_items.unfold_output_items`) and
    their `Costs.prepare` under `key`, on a worker thread for a long chat (`off_loop`); None when a
    message is not an object or there is none. Done once per request: a later filter of the same
    call given the same list (filters rebuild what they change, never edit it in place) gets the
    same results without walking the chat again."""
    known = _BRANCH.get()
    if known is not None and known[0] is messages:
        return known[1], known[2]

    def prepare(stop: StopCheck) -> tuple[list[Mapping[str, Any]], Prepared] | None:
        if not messages or not all(type(m) is dict or isinstance(m, dict) for m in messages):
            return None
        unfolded = output_items.unfold_output_items(messages)
        return unfolded, costs.prepare(unfolded, key, stop)

    found = await off_loop(len(messages), prepare)
    if found is not None:
        _BRANCH.set((messages, *found))
    return found


_PROTECTED_FLAGS = ("echo_protected", "is_external_references")  # as `messages.kind_of` reads them


class Profile(typing.NamedTuple):
    """What compression needs to know of every message of a request, computed once."""

    kinds: tuple[msgs.Kind, ...]
    costs: tuple[int, ...]


class Prepared(typing.NamedTuple):
    """A request's profile, its turns (positions and chain) and their atomic groups."""

    profile: Profile
    turns: msgs.Turns
    groups: tuple[grp.Group, ...]


def _invariant_hash(role: str, text: str, files: tuple[str, ...], tools: str) -> str:
    return chain.invariant_hash(role, text, files, tools=tools)


def _link(
    index: int, role: str, invariant: str, parent: str | None, message_id: str | None
) -> chain.ChainLink:
    return chain.ChainLink(index, role, invariant, chain.cumulative_hash(invariant, parent), message_id)


@dataclass(frozen=True)
class _Seen:
    """The last request prepared under one key: shallow copies of its messages and the results."""

    messages: list[dict[str, Any]]
    prepared: Prepared


class Costs:
    """The caches of one process (see the module docstring)."""

    def __init__(self, entries: int = CACHE_ENTRIES) -> None:
        self.entries = entries
        memo = functools.lru_cache(maxsize=entries)
        self.count: Callable[[str], int] = memo(tokens.estimate_tokens)
        """`echo.domain.tokens.estimate_tokens`, cached."""
        count = self.count

        def plain_profile(role: str, content: str, flagged: bool) -> tuple[msgs.Kind, int]:
            # A message with a string content and no tool calls is priced by these three alone: the
            # message they make again has its kind and cost.
            message = {"role": role, "content": content, "metadata": {_PROTECTED_FLAGS[0]: flagged}}
            return msgs.kind_of(message), msgs.message_tokens(message, count)

        self._profile = memo(plain_profile)
        self._hash = memo(_invariant_hash)
        # A link by (index, role, invariant, parent cumulative hash, message id): the parent fixes
        # the prefix, so the index and the cumulative hash, and the invariant the role.
        self._link = memo(_link)
        self._lock = threading.Lock()  # for `_seen`
        self._seen: cachetools.LRUCache[Hashable, _Seen] = cachetools.LRUCache(
            maxsize=entries, getsizeof=lambda seen: len(seen.messages)
        )

    def profile(self, messages: Sequence[Mapping[str, Any]], stop: StopCheck = _never) -> Profile:
        """`messages.kinds_of` and every message's `messages.message_tokens`, cached per message."""
        kinds: list[msgs.Kind] = []
        costs: list[int] = []
        for index, message in enumerate(messages):
            if not index % STOP_EVERY and stop():
                raise Abandoned
            role, content = message.get("role"), message.get("content")
            if type(role) is str and type(content) is str and message.get("tool_calls") is None:
                metadata = message.get("metadata")
                flagged = (
                    metadata is not None
                    and isinstance(metadata, Mapping)
                    and any(metadata.get(f) for f in _PROTECTED_FLAGS)
                )
                found = self._profile(role, content, flagged)
            else:
                found = (msgs.kind_of(message), msgs.message_tokens(message, self.count))
            kinds.append(found[0])
            costs.append(found[1])
        return Profile(tuple(kinds), tuple(costs))

    def turns(
        self, messages: Sequence[Mapping[str, Any]], kinds: Sequence[msgs.Kind], stop: StopCheck = _never
    ) -> msgs.Turns:
        """`messages.conversation_turns`, with the hashes cached (the same links, built the same way)."""
        positions = msgs.turn_positions(kinds)
        return msgs.Turns(positions, self._chain(messages, positions, (), stop))

    def prepare(
        self, messages: Sequence[Mapping[str, Any]], key: Hashable | None = None, stop: StopCheck = _never
    ) -> Prepared:
        """`profile`, `turns` and `groups.turn_groups` of ``messages``; with a ``key``, the previous
        request prepared under it stands for the prefix it shares with this one. Raises `Abandoned`
        when ``stop()`` turns true (looked at every `STOP_EVERY` messages); nothing is remembered then."""
        with self._lock:
            seen = self._seen.get(key) if key is not None else None
        start = _shared(messages, seen.messages) if seen is not None else 0
        if seen is None or start == 0:
            profile = self.profile(messages, stop)
            turns = self.turns(messages, profile.kinds, stop)
            prepared = Prepared(profile, turns, grp.turn_groups(messages, turns.positions))
            copies = [dict(message) for message in messages]
        else:
            prepared = self._extend(messages, _truncated(seen.prepared, start), start, stop)
            copies = seen.messages[:start] + [dict(message) for message in messages[start:]]
        if key is not None:
            self._remember(key, _Seen(copies, prepared))
        return prepared

    def _extend(
        self, messages: Sequence[Mapping[str, Any]], before: Prepared, start: int, stop: StopCheck = _never
    ) -> Prepared:
        """``before``, the results for ``messages[:start]`` (its groups possibly short of its last
        turns), extended to every message."""
        if start == len(messages) and (before.groups[-1].stop if before.groups else 0) == len(before.turns):
            return before  # the same request again
        tail = self.profile(messages[start:], stop)
        kinds = before.profile.kinds + tail.kinds
        added = tuple(start + index for index, kind in enumerate(tail.kinds) if kind is msgs.Kind.TURN)
        positions = before.turns.positions + added
        links = self._chain(messages, added, before.turns.links, stop) if added else before.turns.links
        groups = before.groups
        if added or (groups[-1].stop if groups else 0) != len(positions):
            first = groups[-1].start if groups else 0  # the last group may go on: a call's results
            groups = groups[:-1] + grp.turn_groups(messages, positions, first=first)
        profile = Profile(kinds, before.profile.costs + tail.costs)
        return Prepared(profile, msgs.Turns(positions, links), groups)

    def _remember(self, key: Hashable, seen: _Seen) -> None:
        with self._lock:
            self._seen.pop(key, None)
            if len(seen.messages) <= self._seen.maxsize:  # the least recently prepared chats make room
                self._seen[key] = seen

    def _chain(
        self,
        messages: Sequence[Mapping[str, Any]],
        positions: Sequence[int],
        before: Sequence[chain.ChainLink],
        stop: StopCheck = _never,
    ) -> tuple[chain.ChainLink, ...]:
        """``before`` followed by the links of the turns at ``positions`` (each cached, see `__init__`)."""
        links: list[chain.ChainLink] = list(before)
        parent: str | None = links[-1].cumulative if links else None
        hashed, linked = self._hash, self._link
        for count, position in enumerate(positions):
            if not count % STOP_EVERY and stop():
                raise Abandoned
            message = messages[position]
            raw, content = message.get("role"), message.get("content")
            if (
                type(raw) is str
                and type(content) is str
                and message.get("files") is None
                and message.get("tool_calls") is None
                and message.get("tool_call_id") is None
            ):  # the common case: its text is its content, and it has no files nor tools
                role = raw.strip().lower()
                invariant = hashed(role, content, (), "")
            else:
                role, invariant = self._invariant(message)
            message_id = message.get("id")
            link = linked(
                len(links), role, invariant, parent, message_id if isinstance(message_id, str) else None
            )
            links.append(link)
            parent = link.cumulative
        return tuple(links)

    def _invariant(self, message: Mapping[str, Any]) -> tuple[str, str]:
        """The normal role and the invariant hash of one message."""
        role = message.get("role")
        role = role.strip().lower() if isinstance(role, str) else ""
        text, files = chain.message_text(message.get("content")), chain.message_file_ids(message)
        return role, self._hash(role, text, files, chain.message_tools(message))


def _shared(messages: Sequence[Mapping[str, Any]], seen: Sequence[Mapping[str, Any]]) -> int:
    """How many leading messages two requests share (equal dicts)."""
    known = len(seen)
    if len(messages) >= known and list(messages[:known]) == seen:  # the common case: one C-level pass
        return known
    for index, (new, old) in enumerate(zip(messages, seen, strict=False)):
        if new != old:
            return index
    return min(len(messages), known)


def _truncated(prepared: Prepared, start: int) -> Prepared:
    """The results for the first ``start`` messages of a request ``prepared`` stands for. Of the
    groups, those that end by the last of their turns are kept (the next may go on after it)."""
    profile, turns = prepared.profile, prepared.turns
    if start == len(profile.kinds):
        return prepared
    count = bisect.bisect_left(turns.positions, start)
    kept = tuple(group for group in prepared.groups if group.stop <= count)
    return Prepared(
        Profile(profile.kinds[:start], profile.costs[:start]),
        msgs.Turns(turns.positions[:count], turns.links[:count]),
        kept,
    )
