"""
title: ECHO
author: ECHO contributors
version: 0.3.0
license: Apache-2.0
description: Runs ECHO's hooks (context, compression, memory) on every chat; fails open if ECHO is down.
requirements:
"""

# Paste this file into Open WebUI's Admin -> Functions page (type Filter), then enable it globally or on
# the models that should use ECHO. It is the Function alternative to adding ECHO's hook service as a
# Pipelines connection: do one or the other, not both, or every hook runs twice.
#
# It needs nothing beyond what Open WebUI ships (standard library, pydantic, aiohttp): `requirements`
# above is deliberately empty so Open WebUI installs nothing.
#
# Two calls per turn: `POST {ECHO_URL}/hooks/inlet` and `POST {ECHO_URL}/hooks/outlet`. Each runs every
# ECHO filter (context, compression, memory) in their priority order on ECHO's side, each with its own
# valves and deadline; a filter that fails there hands on the body it was given and the others' work
# is kept (ECHO's answer is 200 all the same).
#
# Fail open: if ECHO times out, cannot be reached, or answers anything but a JSON object, the body is
# kept as it was, a warning is logged, and one status line tells the user that the chat continues
# without ECHO. The chat itself never fails because of ECHO.
#
# Status lines from ECHO's filters ("ECHO compression skipped: timed out after 800 ms", ...): each
# call asks for them with the header `X-Echo-Events: 1`, and ECHO then answers
# `{"body": <new body>, "events": [{"description", "level", "done"}]}` with the media type
# `application/vnd.echo.hook-answer+json`. Only the body goes back to Open WebUI; each event is shown
# with `__event_emitter__`. A bare body (`application/json`, what ECHO answers without the header) is
# used as it is.

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import aiohttp
from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

EventEmitter = Callable[[dict[str, Any]], Awaitable[Any]]
Phase = Literal["inlet", "outlet"]
USER_FIELDS = ("id", "email", "name", "role")
EVENTS_HEADER = "X-Echo-Events"  # asks ECHO for its status events beside the body
EVENTS_VERSION = "1"
HOOK_ANSWER_MEDIA_TYPE = "application/vnd.echo.hook-answer+json"  # what ECHO answers when asked
MAX_EVENTS_PER_CALL = 30  # ECHO sends at most 10 per filter; more would flood the chat's status line


class EchoUnavailable(Exception):
    """ECHO could not be used; the message is the reason shown to the user (never the key)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Filter:
    class Valves(BaseModel):
        ECHO_URL: str = Field(default="http://echo-hooks:9099", description="ECHO hook service URL.")
        ECHO_API_KEY: str = Field(default="", description="Bearer key of ECHO's hook service (ECHO_API_KEY).")
        TIMEOUT_SECONDS: float = Field(
            default=3.0,
            description="Deadline of the inlet call (every ECHO filter, 800 ms each by default), seconds.",
        )
        OUTLET_TIMEOUT_SECONDS: float = Field(default=10.0, description="Outlet call deadline, seconds.")
        priority: int = Field(default=0, description="Order of this Function among Open WebUI's filters.")

    def __init__(self) -> None:
        self.valves = self.Valves()

    async def inlet(
        self, body: dict, __user__: dict | None = None, __event_emitter__: EventEmitter | None = None
    ) -> dict:
        return await self._run("inlet", body, __user__, __event_emitter__)

    async def outlet(
        self, body: dict, __user__: dict | None = None, __event_emitter__: EventEmitter | None = None
    ) -> dict:
        return await self._run("outlet", body, __user__, __event_emitter__)

    async def _run(self, phase: Phase, body: dict, user: dict | None, emitter: EventEmitter | None) -> dict:
        valves = self.valves
        base = valves.ECHO_URL.strip().rstrip("/")
        if not base:
            return body
        budget = valves.TIMEOUT_SECONDS if phase == "inlet" else valves.OUTLET_TIMEOUT_SECONDS
        headers = {EVENTS_HEADER: EVENTS_VERSION}
        if valves.ECHO_API_KEY:
            headers["Authorization"] = f"Bearer {valves.ECHO_API_KEY}"
        who = {field: user.get(field) for field in USER_FIELDS} if user else {}
        try:
            async with aiohttp.ClientSession(
                headers=headers, timeout=aiohttp.ClientTimeout(total=budget)
            ) as session:
                answer, events = await _call(session, f"{base}/hooks/{phase}", body, who)
        except EchoUnavailable as failure:
            log.warning(
                "ECHO %s failed for chat %s: %s; keeping the body unchanged",
                phase,
                _chat_id(body) or "-",
                failure.reason,
            )
            if emitter is not None:
                await _emit(emitter, f"ECHO unavailable: {phase} {failure.reason}; continuing without it")
            return body
        if emitter is not None:
            for event in events:
                await _emit_event(emitter, event)
        return answer


async def _call(session: aiohttp.ClientSession, url: str, body: dict, user: dict) -> tuple[dict, list[dict]]:
    """POST the body to ECHO's combined hook; answer the new body and the Open WebUI status events to
    show, or raise EchoUnavailable with the reason."""
    try:
        async with session.post(url, json={"body": body, "user": user}) as response:
            if response.status != 200:
                raise EchoUnavailable(f"answered HTTP {response.status}")
            enveloped = response.content_type == HOOK_ANSWER_MEDIA_TYPE
            try:
                answer = await response.json(content_type=None)
            except ValueError as error:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
                raise EchoUnavailable("answered something that is not JSON") from error
    except EchoUnavailable:
        raise
    except TimeoutError as error:  # aiohttp raises asyncio.TimeoutError, the builtin since Python 3.11
        raise EchoUnavailable("timed out") from error
    except aiohttp.ClientError as error:
        raise EchoUnavailable(f"connection error ({type(error).__name__})") from error
    except Exception as error:  # fail open on anything else too: the chat must go on
        raise EchoUnavailable(f"unexpected error ({type(error).__name__})") from error
    events: list[dict] = []
    if enveloped:  # {"body": ..., "events": [...]}; anything else is a bare body
        if not (
            isinstance(answer, dict)
            and isinstance(answer.get("body"), dict)
            and isinstance(answer.get("events"), list)
        ):
            raise EchoUnavailable("answered a malformed body-and-events envelope")
        events = _status_events(answer["events"], url)
        answer = answer["body"]
    if not isinstance(answer, dict):
        kind = "an empty answer" if answer is None else f"a JSON {type(answer).__name__}"
        raise EchoUnavailable(f"answered {kind}, not a JSON object")
    return answer, events


def _status_events(raw_events: list, url: str) -> list[dict]:
    """ECHO's events (`{"description", "level", "done"}`) as Open WebUI status events; malformed ones
    are logged and left out (they never cost the body)."""
    events = []
    for raw in raw_events[:MAX_EVENTS_PER_CALL]:
        description = raw.get("description") if isinstance(raw, dict) else None
        done = raw.get("done", True) if isinstance(raw, dict) else None
        if not isinstance(description, str) or not description or not isinstance(done, bool):
            log.warning("ECHO %s sent a malformed status event; not shown: %.200r", url, raw)
            continue
        events.append({"type": "status", "data": {"description": description, "done": done}})
    if len(raw_events) > MAX_EVENTS_PER_CALL:
        log.warning(
            "ECHO %s sent %d status events; only the first %d were read",
            url,
            len(raw_events),
            MAX_EVENTS_PER_CALL,
        )
    return events


async def _emit(emitter: EventEmitter, description: str) -> None:
    await _emit_event(emitter, {"type": "status", "data": {"description": description, "done": True}})


async def _emit_event(emitter: EventEmitter, event: dict) -> None:
    try:
        await emitter(event)
    except Exception as error:  # a broken emitter must not fail the chat either
        log.warning("ECHO could not emit a status event: %s", error)


def _chat_id(body: dict) -> str | None:
    """The chat id: in `metadata` on the inlet, at the top level on the outlet."""
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and metadata.get("chat_id"):
        return str(metadata["chat_id"])
    chat_id = body.get("chat_id")
    return str(chat_id) if chat_id else None
