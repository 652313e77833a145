"""Simulated Open WebUI chats for `bench/load.py`: generated users and dialogue, and per turn the hook
calls Open WebUI 0.12.4 makes, each timed: through ECHO's Function (`via="function"`), `POST
/hooks/inlet` then the model then `POST /hooks/outlet`, every filter in each, the answer with its
status events (`X-Echo-Events: 1`); over a Pipelines connection (`via="pipelines"`), every filter's
inlet in priority order, each taking the previous one's body, then the model, then every outlet with
the flat saved-chat body.

The dialogue is generated (a persona per user: name, city, job, family, plans, in varied sentences),
so any number of users talk about different facts. The model is a stand-in: it waits
`model_seconds` and answers with a generated reply. Requests go round-robin over the hook replicas,
as a Service spreads them; a replica refusing connections (killed, not yet restarted) is skipped
for two seconds, as its endpoint leaves the Service.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx

from echo.capabilities.memory import filter as memory_filter
from echo.domain import chain

__all__ = ["CONNECTIONS", "FILTERS", "Balancer", "Chat", "Recorder", "Sample", "hooks_of", "run_chat"]

FILTERS = ("echo_context", "echo_compression", "echo_memory")  # priority order: 0, 10, 20
CONNECTIONS = ("function", "pipelines")
_EVENTS = {"X-Echo-Events": "1"}  # what the Function sends: the answer is {"body": …, "events": […]}


def hooks_of(via: str) -> tuple[str, ...]:
    """The hooks one turn calls, by the names its samples carry (`"<hook> inlet"`, `"<hook> outlet"`)."""
    return ("hooks",) if via == "function" else FILTERS


MODEL = "gemini-2.5-flash"

_NAMES = [
    "Ana",
    "Bilal",
    "Chen",
    "Dalia",
    "Emeka",
    "Freya",
    "Goran",
    "Hana",
    "Ines",
    "Jonas",
    "Kiri",
    "Lena",
    "Mateo",
    "Noor",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sami",
    "Tomoko",
]
_CITIES = [
    "Lisbon",
    "Nairobi",
    "Osaka",
    "Montreal",
    "Tbilisi",
    "Lyon",
    "Cusco",
    "Bergen",
    "Hanoi",
    "Adelaide",
    "Porto",
    "Krakow",
    "Valparaiso",
    "Leeds",
    "Izmir",
    "Quito",
]
_JOBS = [
    "nurse",
    "carpenter",
    "data engineer",
    "teacher",
    "pastry chef",
    "translator",
    "architect",
    "bus driver",
    "pharmacist",
    "sound technician",
    "lawyer",
    "beekeeper",
]
_HOBBIES = [
    "bouldering",
    "growing chillies",
    "restoring bikes",
    "choir singing",
    "sea kayaking",
    "chess",
    "pottery",
    "birdwatching",
    "salsa dancing",
    "astrophotography",
]
_PETS = ["a grey cat called Miso", "two budgies", "an old beagle named Pepper", "a tortoise", "no pets"]
_PLANS = [
    "a trip to Iceland in March",
    "a half marathon in the autumn",
    "moving to a bigger flat",
    "learning Portuguese",
    "building a garden shed",
    "a cooking course in Bologna",
]
_USER_LINES = [
    "I live in {city} and work as a {job}, which keeps me busy most weekdays.",
    "On weekends I love {hobby}; it clears my head after a long week.",
    "At home I have {pet}, so I cannot travel for long without arranging a sitter.",
    "My sister {sibling} is visiting soon and I want to plan something nice for her.",
    "I am preparing {plan} and I would like a simple plan with weekly steps.",
    "Yesterday at work something odd happened: a colleague mixed up two orders and it took hours.",
    "Can you suggest a quick dinner with lentils and spinach? I have about twenty minutes.",
    "I keep forgetting to drink water during shifts; any practical trick that works?",
    "Honestly I am a bit tired today, so keep the answer short please.",
    "Remind me what you think about budgeting for {plan}; I earn a modest salary.",
    "My favourite book is about a lighthouse keeper, I reread it every winter.",
    "I am allergic to peanuts, so please avoid them in any recipe you suggest.",
]
_REPLY_LINES = [
    "That sounds like a good plan; start small and keep a short list of what worked each week.",
    "Living in {city} gives you plenty of options; a morning routine could help with the schedule.",
    "For {plan}, break it into four stages and check your progress every Sunday evening.",
    "Twenty minutes is enough: fry garlic, add lentils, stock and spinach, then finish with lemon.",
    "A refillable bottle on the counter and a reminder at each break tends to work for shift work.",
    "Since {sibling} is visiting, a walk through the old town and a long lunch might be ideal.",
    "Being a {job} is demanding; protect your rest days and keep one evening free of plans.",
    "I will keep peanuts out of every suggestion; seeds or toasted oats make good substitutes.",
]


@dataclass(frozen=True)
class Sample:
    """One hook call: which hook, how long, the HTTP status (0: no answer), when it ended."""

    hook: str
    ms: float
    status: int
    ended: float


@dataclass
class Recorder:
    samples: list[Sample] = field(default_factory=list)
    failed_turns: int = 0
    errors: list[str] = field(default_factory=list)


class Balancer:
    """Round-robin over the hook replicas; a replica refusing connections is left out for 2 s."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = list(urls)
        self._down: dict[str, float] = {}
        self._next = 0

    def pick(self) -> str:
        now = time.monotonic()
        for _ in range(len(self.urls)):
            url = self.urls[self._next % len(self.urls)]
            self._next += 1
            if self._down.get(url, 0.0) <= now:
                return url
        return self.urls[self._next % len(self.urls)]

    def refused(self, url: str) -> None:
        self._down[url] = time.monotonic() + 2.0

    def leave(self, url: str, seconds: float) -> None:
        """The replica's endpoint leaves the Service for `seconds` (a pod terminating, then back)."""
        self._down[url] = time.monotonic() + seconds


class Chat:
    """One user's chat: the persona, the saved messages, the bodies Open WebUI sends for them."""

    def __init__(self, user_index: int, seed: int) -> None:
        self.rng = random.Random(seed * 100_003 + user_index)
        self.user_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"load-user-{user_index}"))
        self.chat_id = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
        name = _NAMES[user_index % len(_NAMES)]
        self.user = {
            "id": self.user_id,
            "email": f"user{user_index}@example.com",
            "name": name,
            "role": "user",
        }
        self.facts = {
            "city": self.rng.choice(_CITIES),
            "job": self.rng.choice(_JOBS),
            "hobby": self.rng.choice(_HOBBIES),
            "pet": self.rng.choice(_PETS),
            "sibling": self.rng.choice(_NAMES),
            "plan": self.rng.choice(_PLANS),
        }
        self.messages: list[dict[str, Any]] = []  # as Open WebUI saves them (ids, timestamps)

    def _say(self, lines: list[str], count: int) -> str:
        return " ".join(line.format(**self.facts) for line in self.rng.sample(lines, count))

    def user_text(self) -> str:
        return self._say(_USER_LINES, self.rng.randint(2, 4))

    def reply_text(self) -> str:
        return self._say(_REPLY_LINES, self.rng.randint(2, 4))

    def _message(self, role: str, text: str) -> dict[str, Any]:
        return {"id": str(uuid.uuid4()), "role": role, "content": text, "timestamp": int(time.time())}

    def answered(self, message: dict[str, Any]) -> None:
        """Save the user's message and the model's reply, as Open WebUI does after the answer."""
        self.messages += [message, self._message("assistant", self.reply_text())]

    def inlet(self, text: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The first filter's inlet payload for a new user message, and that message."""
        message = self._message("user", text)
        history = [{"role": m["role"], "content": m["content"]} for m in [*self.messages, message]]
        body = {
            "model": MODEL,
            "stream": True,
            "messages": history,
            "metadata": {
                "chat_id": self.chat_id,
                "user_id": self.user_id,
                "user_message_id": message["id"],
                "message_id": str(uuid.uuid4()),
                "session_id": f"load-{self.user_id[:8]}",
                "variables": {"{{USER_NAME}}": self.user["name"], "{{CURRENT_TIMEZONE}}": "Europe/Paris"},
            },
        }
        return {"user": self.user, "body": body}, message

    def outlet(self) -> dict[str, Any]:
        body = {
            "model": MODEL,
            "messages": self.messages,
            "chat_id": self.chat_id,
            "session_id": f"load-{self.user_id[:8]}",
            "id": self.messages[-1]["id"],
        }
        return {"user": self.user, "body": body}

    def expected_distill_keys(self, size: int) -> list[str]:
        """The idempotency keys of every window the chat's outlets make due (every `size` messages)."""
        links = chain.build_chain(self.messages)
        return [
            memory_filter.distill_job_key(self.user_id, links[end - 1].cumulative)
            for end in range(size, len(links) + 1, size)
        ]


async def _call(
    http: httpx.AsyncClient,
    balancer: Balancer,
    path: str,
    payload: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> tuple[int, Any, float]:
    """POST to a replica (another one when a connection is refused); status 0 when none answered."""
    started = time.perf_counter()
    for _ in range(len(balancer.urls) + 1):
        url = balancer.pick()
        try:
            answer = await http.post(url + path, json=payload, headers=headers)
        except httpx.ConnectError:
            balancer.refused(url)
            await asyncio.sleep(0.05)
            continue
        except httpx.TransportError as error:  # e.g. the replica died with the request in flight
            balancer.refused(url)
            return 0, f"{type(error).__name__}: {error}", (time.perf_counter() - started) * 1000
        body = answer.json() if answer.status_code == 200 else answer.text
        return answer.status_code, body, (time.perf_counter() - started) * 1000
    return 0, None, (time.perf_counter() - started) * 1000


async def run_turn(
    http: httpx.AsyncClient,
    balancer: Balancer,
    chat: Chat,
    recorder: Recorder,
    model_seconds: float,
    via: str = "function",
) -> bool:
    """One chat turn as Open WebUI runs it; False when Open WebUI would have failed it (an inlet)."""
    payload, message = chat.inlet(chat.user_text())
    for hook in hooks_of(via):
        status, answer, ms = await _hook(http, balancer, hook, "inlet", payload)
        recorder.samples.append(Sample(f"{hook} inlet", ms, status, time.monotonic()))
        if status != 200 or not isinstance(answer, dict):
            recorder.failed_turns += 1
            recorder.errors.append(f"{hook} inlet: {status} {str(answer)[:200]}")
            return False
        payload = {"user": chat.user, "body": answer}
    await asyncio.sleep(model_seconds)
    chat.answered(message)
    outlet = chat.outlet()
    for hook in hooks_of(via):
        status, answer, ms = await _hook(http, balancer, hook, "outlet", outlet)
        recorder.samples.append(Sample(f"{hook} outlet", ms, status, time.monotonic()))
        if status != 200 or not isinstance(answer, dict):
            recorder.errors.append(f"{hook} outlet: {status} {str(answer)[:200]}")
            break  # Open WebUI keeps the reply and drops the outlets' edits
        outlet = {"user": chat.user, "body": answer}
    return True


async def _hook(
    http: httpx.AsyncClient, balancer: Balancer, hook: str, phase: str, payload: dict[str, Any]
) -> tuple[int, Any, float]:
    """One hook call: the Function's combined `POST /hooks/{phase}` (its answer's body), or one
    filter's `POST /{hook}/filter/{phase}`."""
    if hook != "hooks":
        return await _call(http, balancer, f"/{hook}/filter/{phase}", payload)
    status, answer, ms = await _call(http, balancer, f"/hooks/{phase}", payload, _EVENTS)
    if status == 200 and isinstance(answer, dict):
        answer = answer.get("body")
    return status, answer, ms


async def run_chat(
    http: httpx.AsyncClient,
    balancer: Balancer,
    chat: Chat,
    recorder: Recorder,
    *,
    turns: int,
    until: float | None,
    model_seconds: float,
    think_seconds: float,
    via: str = "function",
) -> None:
    """`turns` successful turns, or turns until the monotonic time `until` (a failed one is sent
    again, as a user would), a pause between them."""
    done = attempts = 0
    await asyncio.sleep(chat.rng.uniform(0, think_seconds))  # chats do not all start at once
    while done < turns and attempts < 3 * turns and (until is None or time.monotonic() < until):
        attempts += 1
        if await run_turn(http, balancer, chat, recorder, model_seconds, via):
            done += 1
        await asyncio.sleep(think_seconds)
