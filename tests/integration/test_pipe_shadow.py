"""The rich shadow through the pipe over HTTP: the real app (uvicorn), the real PostgreSQL, the real
google-genai SDK against the fake Gemini, which refuses function calls without their thought
signature as the real API does. Turns are sent as Open WebUI 0.12.4 sends them
(`tests/fixtures/owui-0.12.4/tool_flow/`): the pipe's own inlet first, then `/chat/completions`
with what Open WebUI keeps of the history (no signatures, arguments re-serialised)."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fakes.gemini_server import FakeGemini, signature_bytes
from fakes.live_server import LiveServer
from fakes.shared_data import FIXTURES

from echo.adapters.embeddings.fake import FakeEmbedder
from echo.adapters.store import shadow as shadow_store
from echo.adapters.store.pool import Store
from echo.adapters.vectors.memory import InMemoryVectorStore
from echo.capabilities import backends as capability_backends
from echo.capabilities.memory import backends as memory_backends
from echo.config.settings import Settings
from echo.domain import shadow
from echo.entrypoints.http import create_app
from echo.ports import backends as backends_port
from echo.ports import vectors as vectors_base

PIPE = "echo.gemini-2.5-flash"
USER = {"id": "u-ada", "name": "Ada", "email": "ada@example.com", "role": "user"}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "the name of the city"}},
            "required": ["city"],
        },
    },
}
SIG_CALL = b"\x00\x01sig-of-the-call\xff" * 3
SIG_ANSWER = b"\x10sig-of-the-answer\xfe" * 2


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def signed(part: dict[str, Any]) -> bytes:
    """The bytes of a part's thoughtSignature as the SDK sent it (URL-safe base64)."""
    return signature_bytes(part["thoughtSignature"])


def openwebui_tools() -> list[dict[str, Any]]:
    """The tools Open WebUI sends with native function calling: the user's tool and its built-ins."""
    return json.loads((FIXTURES / "tool_flow" / "002_chat.json").read_text())["body"]["tools"]


@dataclass
class Backends:
    store: Store
    embedder: FakeEmbedder
    vectors: InMemoryVectorStore

    def backends(self) -> backends_port.Backends:
        return backends_port.Backends(
            store=capability_backends.on_store(self.store), index=memory_backends.RuntimeBackends(self)
        )

    async def readiness(self) -> dict[str, dict[str, Any]]:
        return {"store": {"ok": True}}


def backends_factory(dsn: str, schema: str, vectors: InMemoryVectorStore) -> Callable[[Settings], Any]:
    @asynccontextmanager
    async def open_backends(settings: Settings) -> AsyncIterator[Backends]:
        store = await Store.open(dsn, schema=schema, max_size=4)
        try:
            yield Backends(store, FakeEmbedder(dimension=16), vectors)
        finally:
            await store.close()

    return open_backends


@pytest.fixture(scope="module")
def gemini() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@pytest.fixture
def vectors() -> InMemoryVectorStore:
    return InMemoryVectorStore(dimension=16)


@pytest.fixture
def settings(tmp_path: Any, gemini: FakeGemini) -> Settings:
    return Settings(
        data_dir=tmp_path,
        api_key="k",
        gemini_api_key="fake",
        gemini_base_url=gemini.base_url,
        pipe_models=["gemini-2.5-flash"],
        llm_max_retries=1,
        llm_retry_max_wait_seconds=2,
        pipe_max_tool_rounds=2,
    )


@pytest.fixture
async def http(
    settings: Settings, store: Store, vectors: InMemoryVectorStore, gemini: FakeGemini
) -> AsyncIterator[httpx.AsyncClient]:
    gemini.reset()
    app = create_app(settings, backends=backends_factory(store.dsn, store.schema, vectors))
    with LiveServer(app, name="echo-hooks") as live:
        async with httpx.AsyncClient(
            base_url=live.url, headers={"Authorization": "Bearer k"}, timeout=30
        ) as client:
            yield client


def sse(text: str) -> list[Any]:
    events = []
    for block in text.split("\n\n"):
        if block.startswith("data: "):
            data = block.removeprefix("data: ")
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


@dataclass
class Answer:
    content: str
    reasoning: str
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    events: list[Any]


async def turn(
    http: httpx.AsyncClient,
    messages: list[dict[str, Any]],
    *,
    user: dict[str, Any] = USER,
    chat_id: str = "chat-1",
    tools: list[dict[str, Any]] | None = None,
    echo_ctx: dict[str, Any] | None = None,
    inlet_messages: list[dict[str, Any]] | None = None,
) -> tuple[Answer, dict[str, Any]]:
    """One call as Open WebUI makes it: the pipe's inlet (unless ``echo_ctx`` is given: a follow-up
    call of the same turn carries the one of its first call), then the streamed chat call."""
    if echo_ctx is None:
        inlet_body = {
            "stream": True,
            "model": PIPE,
            "messages": copy.deepcopy(inlet_messages or messages),
            "metadata": {
                "user_id": user["id"],
                "chat_id": chat_id,
                "model": {"id": PIPE},
                "message_id": "a-1",
            },
        }
        inlet = await http.post(f"/{PIPE}/filter/inlet", json={"body": inlet_body, "user": user})
        assert inlet.status_code == 200, inlet.text
        echo_ctx = inlet.json()["echo_ctx"]
    body: dict[str, Any] = {
        "stream": True,
        "model": PIPE,
        "messages": messages,
        "user": user,
        "echo_ctx": echo_ctx,
    }
    if tools is not None:
        body["tools"] = tools
    async with http.stream(
        "POST", "/chat/completions", json=body, headers={"x-openwebui-chat-id": chat_id}
    ) as response:
        assert response.status_code == 200, await response.aread()
        events = sse("".join([chunk async for chunk in response.aiter_text()]))
    assert events[-1] == "[DONE]"
    chunks = [e for e in events[:-1] if "choices" in e]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    calls = [call for d in deltas for call in d.get("tool_calls", [])]
    finish = next(
        (c["choices"][0]["finish_reason"] for c in chunks if c["choices"][0]["finish_reason"]), None
    )
    answer = Answer(
        "".join(d.get("content", "") for d in deltas),
        "".join(d.get("reasoning_content", "") for d in deltas),
        calls,
        finish,
        events,
    )
    return answer, echo_ctx


def as_openwebui_replays(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What Open WebUI sends back of streamed tool calls: id, type, name and re-serialised arguments."""
    return [
        {
            "id": call["id"],
            "type": "function",
            "function": {
                "name": call["function"]["name"],
                "arguments": json.dumps(json.loads(call["function"]["arguments"]), separators=(",", ":")),
            },
        }
        for call in calls
    ]


def model_contents(gemini: FakeGemini, request: int = -1) -> list[dict[str, Any]]:
    return [c for c in gemini.requests[request].body["contents"] if c.get("role") == "model"]


async def rows(store: Store, table: str, user_id: str = USER["id"]) -> int:
    return int(await store.fetchval(f"SELECT count(*) FROM {table} WHERE user_id = $1", user_id))


async def test_open_webui_tool_round_trip_sends_back_the_signature_and_arguments_byte_identical(
    http: httpx.AsyncClient, gemini: FakeGemini, store: Store
) -> None:
    question = [{"role": "user", "content": "What is the weather in Paris?"}]
    gemini.reply_function_calls(
        [("get_weather", {"city": "Paris", "unit": "celsius"})], SIG_CALL, thought="Weather: ask the tool."
    )
    first, ctx = await turn(http, question, tools=openwebui_tools())
    assert first.finish_reason == "tool_calls"
    assert first.reasoning == "Weather: ask the tool."
    [call] = first.tool_calls
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris", "unit": "celsius"}
    declared = gemini.requests[-1].body["tools"][0]["functionDeclarations"]
    assert {"get_weather", "search_memories"} <= {d["name"] for d in declared}

    # Open WebUI runs the tool and calls again, in the same turn, without the signature.
    history = [
        *question,
        {"role": "assistant", "content": "", "tool_calls": as_openwebui_replays(first.tool_calls)},
        {"role": "tool", "tool_call_id": call["id"], "content": "sunny in Paris, 21 C"},
    ]
    gemini.reply_stream(["It is sunny", " in Paris."], thought_signature=SIG_ANSWER)
    second, _ = await turn(http, history, tools=openwebui_tools(), echo_ctx=ctx)
    assert second.content == "It is sunny in Paris."
    assert second.finish_reason == "stop"
    sent = gemini.requests[-1].body["contents"]
    assert sent[1]["role"] == "model"
    assert sent[1]["parts"][0] == {"text": "Weather: ask the tool.", "thought": True}
    call_part = sent[1]["parts"][1]
    assert signed(call_part) == SIG_CALL  # the bytes Gemini sent, not a placeholder
    assert list(call_part["functionCall"]["args"]) == ["city", "unit"]  # Gemini's order, not Open WebUI's
    assert call_part["functionCall"]["args"] == {"city": "Paris", "unit": "celsius"}
    assert sent[2]["parts"] == [
        {"functionResponse": {"name": "get_weather", "response": {"result": "sunny in Paris, 21 C"}}}
    ]

    # The next turn replays the whole history; both signatures go back where they came from.
    history += [
        {"role": "assistant", "content": second.content},
        {"role": "user", "content": "And what should I wear?"},
    ]
    gemini.reply_text("A light jacket.")
    third, _ = await turn(http, history, tools=openwebui_tools())
    assert third.content == "A light jacket."
    models = model_contents(gemini)
    assert signed(models[0]["parts"][1]) == SIG_CALL
    # The streamed text, its signature still on the chunk it came with (Gemini: never merge a signed
    # part with an unsigned one).
    assert [p["text"] for p in models[1]["parts"]] == ["It is sunny", " in Paris."]
    assert "thoughtSignature" not in models[1]["parts"][0]
    assert signed(models[1]["parts"][1]) == SIG_ANSWER
    assert await rows(store, "cognitive_signatures") == 2
    journal = await store.fetch("SELECT name, call_id, arguments::text, executor FROM tool_journal")
    assert [(r["name"], r["call_id"], r["executor"]) for r in journal] == [
        ("get_weather", call["id"], "openwebui")
    ]
    assert json.loads(journal[0]["arguments"]) == {"city": "Paris", "unit": "celsius"}


async def test_a_follow_up_the_shadow_does_not_know_gets_the_placeholder_signature(
    http: httpx.AsyncClient, gemini: FakeGemini
) -> None:
    history = [
        {"role": "user", "content": "What is the weather in Rome?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_x",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Rome"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_x", "content": "rain"},
    ]
    gemini.reply_text("Take an umbrella.")
    answer, _ = await turn(http, history, tools=[WEATHER_TOOL])
    assert answer.content == "Take an umbrella."
    part = model_contents(gemini)[0]["parts"][0]
    assert signed(part) == b"skip_thought_signature_validator"
    metrics = (await http.get("/metrics")).text
    assert "echo_shadow_placeholder_signatures_total 1.0" in metrics
    assert 'echo_shadow_suture_total{kind="tool_calls",outcome="miss"}' in metrics


async def test_the_fake_refuses_a_call_without_its_signature_as_gemini_does(gemini: FakeGemini) -> None:
    from echo.adapters.llm.gemini_chat import GeminiChat, LLMError

    chat = GeminiChat("fake", base_url=gemini.base_url)
    contents = [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {"role": "model", "parts": [{"function_call": {"name": "get_weather", "args": {"city": "Paris"}}}]},
        {
            "role": "user",
            "parts": [{"function_response": {"name": "get_weather", "response": {"result": "sun"}}}],
        },
    ]
    try:
        with pytest.raises(LLMError, match="missing a thought_signature") as raised:
            await anext(chat.stream_contents("gemini-2.5-flash", contents, {}))
        assert raised.value.status == 400
        contents[1]["parts"][0]["thought_signature"] = b"forged"
        with pytest.raises(LLMError, match="Corrupted thought signature"):
            await anext(chat.stream_contents("gemini-2.5-flash", contents, {}))
    finally:
        await chat.aclose()


async def test_echo_tools_run_in_the_pipe_journaled_and_restored_in_later_turns(
    http: httpx.AsyncClient, gemini: FakeGemini, store: Store, vectors: InMemoryVectorStore
) -> None:
    embedder = FakeEmbedder(dimension=16)
    fact = "Ada has a border collie called Pixel"
    point = vectors_base.Point(
        id="m-1", vector=embedder.vector(fact), user_id=USER["id"], payload={"summary": fact, "tags": ["dog"]}
    )
    await vectors.upsert(vectors_base.Kind.MEMORY, [point])
    question = [{"role": "user", "content": "What is my dog's name?"}]
    gemini.reply_function_calls([("search_memories", {"query": fact})], SIG_CALL)
    gemini.reply_text("Your dog is Pixel.", thought_signature=SIG_ANSWER)
    answer, _ = await turn(http, question)
    assert answer.content == "Your dog is Pixel."
    assert not answer.tool_calls
    followed = gemini.requests[-1].body["contents"]
    assert signed(followed[1]["parts"][0]) == SIG_CALL
    response = followed[2]["parts"][0]["functionResponse"]
    assert response["name"] == "search_memories"
    assert response["response"]["memories"][0]["summary"] == fact
    journal = await store.fetchrow(
        "SELECT executor, response::text FROM tool_journal WHERE user_id = $1", USER["id"]
    )
    assert journal is not None
    assert journal["executor"] == "echo"
    assert json.loads(journal["response"])["memories"][0]["summary"] == fact

    # Open WebUI only knows the final text; the next turn gets the call and its result back.
    gemini.reply_text("You are welcome.")
    history = [
        *question,
        {"role": "assistant", "content": answer.content},
        {"role": "user", "content": "Thanks"},
    ]
    await turn(http, history)
    sent = gemini.requests[-1].body["contents"]
    assert [c["role"] for c in sent] == ["user", "model", "user", "model", "user"]
    assert sent[1]["parts"][0]["functionCall"] == {"name": "search_memories", "args": {"query": fact}}
    assert sent[2]["parts"][0]["functionResponse"]["response"]["memories"][0]["summary"] == fact
    assert sent[3]["parts"][0]["text"] == "Your dog is Pixel."
    assert signed(sent[3]["parts"][0]) == SIG_ANSWER


async def test_echo_tool_rounds_are_bounded(http: httpx.AsyncClient, gemini: FakeGemini) -> None:
    for i in range(3):  # pipe_max_tool_rounds=2: the third call is answered with the limit
        gemini.reply_function_calls([("search_memories", {"query": f"q{i}"})], f"sig-{i}".encode())
    gemini.reply_text("Done searching.")
    answer, _ = await turn(http, [{"role": "user", "content": "Search a lot."}])
    assert answer.content == "Done searching."
    last = gemini.requests[-1].body
    assert last["toolConfig"]["functionCallingConfig"]["mode"] == "NONE"
    limit = last["contents"][-1]["parts"][0]["functionResponse"]["response"]
    assert "limit of tool rounds" in limit["error"]
    assert len(gemini.requests) == 4


async def test_an_edit_starts_a_branch_whose_history_never_gets_the_other_branchs_rows(
    http: httpx.AsyncClient, gemini: FakeGemini, store: Store
) -> None:
    gemini.reply_text("Paris is the capital.", thought_signature=SIG_ANSWER)
    first, _ = await turn(http, [{"role": "user", "content": "Capital of France?"}])
    # Edited question, same answer text: another branch, so another cumulative hash.
    edited = [
        {"role": "user", "content": "Capital of France, please?"},
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "And of Italy?"},
    ]
    gemini.reply_text("Rome.")
    await turn(http, edited)
    assert model_contents(gemini)[0]["parts"] == [{"text": "Paris is the capital."}]  # no signature
    # The original branch still restores its own.
    original = [{"role": "user", "content": "Capital of France?"}, *edited[1:]]
    gemini.reply_text("Rome.")
    await turn(http, original)
    assert signed(model_contents(gemini)[0]["parts"][0]) == SIG_ANSWER
    assert await rows(store, "suture_index") >= 4


async def test_regenerated_answers_keep_their_own_rows(http: httpx.AsyncClient, gemini: FakeGemini) -> None:
    question = [{"role": "user", "content": "Tell me a colour."}]
    gemini.reply_text("Blue.", thought_signature=b"sig-blue")
    blue, _ = await turn(http, question)
    gemini.reply_text("Green.", thought_signature=b"sig-green")  # Open WebUI's "regenerate"
    green, _ = await turn(http, question)
    for answer, signature in ((green, b"sig-green"), (blue, b"sig-blue")):
        gemini.reply_text("ok")
        history = [
            *question,
            {"role": "assistant", "content": answer.content},
            {"role": "user", "content": "why?"},
        ]
        await turn(http, history)
        assert signed(model_contents(gemini)[0]["parts"][0]) == signature


async def test_media_the_pipe_received_is_restored_and_stored_once_across_chats(
    http: httpx.AsyncClient, gemini: FakeGemini, store: Store
) -> None:
    pdf = b"%PDF-1.7 " + bytes(range(256)) * 40
    media = {"type": "image_url", "image_url": {"url": "data:application/pdf;base64," + b64(pdf)}}
    for chat_id in ("chat-a", "chat-b"):
        typed = [{"role": "user", "content": f"Summarise this ({chat_id})."}]
        # What the pipe receives: the file as a native part after the inlets (the inlet saw the text).
        received = [{"role": "user", "content": [{"type": "text", "text": typed[0]["content"]}, media]}]
        gemini.reply_text("A report.")
        await turn(http, received, chat_id=chat_id, inlet_messages=typed)
    assert await rows(store, "rich_payloads") == 1
    later = [
        {"role": "user", "content": "Summarise this (chat-a)."},
        {"role": "assistant", "content": "A report."},
        {"role": "user", "content": "Its first page?"},
    ]
    gemini.reply_text("The title.")
    await turn(http, later, chat_id="chat-a")
    first = gemini.requests[-1].body["contents"][0]["parts"]
    assert first[0] == {"text": "Summarise this (chat-a)."}
    assert signature_bytes(first[1]["inlineData"]["data"]) == pdf  # URL-safe base64, as the SDK writes


async def test_an_unreadable_shadow_falls_back_to_the_plain_history(
    http: httpx.AsyncClient, gemini: FakeGemini, store: Store
) -> None:
    gemini.reply_text("Hello.", thought_signature=SIG_ANSWER)
    first, _ = await turn(http, [{"role": "user", "content": "Hi"}])
    await store.execute('UPDATE suture_index SET rich = \'[{"role": "model", "parts": [{"ref": "gone"}]}]\'')
    shadow_store.PROCESS_POINTS.forget((store.schema, USER["id"]))  # as another replica reads it
    gemini.reply_text("Still here.")
    history = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "?"},
    ]
    answer, _ = await turn(http, history)
    assert answer.content == "Still here."
    assert model_contents(gemini)[0]["parts"] == [{"text": "Hello."}]
    assert (
        'echo_shadow_failures_total{reason="unreadable",stage="restore"}' in (await http.get("/metrics")).text
    )


async def test_users_never_share_shadow_rows(
    http: httpx.AsyncClient, gemini: FakeGemini, store: Store
) -> None:
    question = [{"role": "user", "content": "Same words, two users."}]
    gemini.reply_text("Same answer.", thought_signature=SIG_ANSWER)
    await turn(http, question)
    other = {**USER, "id": "u-bob"}
    history = [
        *question,
        {"role": "assistant", "content": "Same answer."},
        {"role": "user", "content": "next"},
    ]
    gemini.reply_text("ok")
    await turn(http, history, user=other)
    assert model_contents(gemini)[0]["parts"] == [{"text": "Same answer."}]  # not Ada's signature
    assert await rows(store, "suture_index", "u-bob") == 2  # bob's own turn and answer
    forgotten = await shadow_store.ShadowStore(store).forget(USER["id"])
    assert forgotten["suture_index"] == 2
    assert forgotten["cognitive_signatures"] == 1
    for table in ("suture_index", "rich_payloads", "cognitive_signatures", "tool_journal"):
        assert await rows(store, table) == 0
    assert await rows(store, "suture_index", "u-bob") == 2


async def test_the_users_turn_is_recorded_before_gemini_is_called(
    http: httpx.AsyncClient, gemini: FakeGemini, store: Store
) -> None:
    gemini.reply_error(400, "bad request upstream")
    body = {"model": PIPE, "stream": True, "messages": [{"role": "user", "content": "Lost?"}], "user": USER}
    answer = await http.post("/chat/completions", json=body)
    assert answer.status_code == 502
    assert answer.json()["error"]["code"] == 400
    recorded = await store.fetch(
        "SELECT role, position, parent_hash FROM suture_index WHERE user_id = $1", USER["id"]
    )
    assert [(r["role"], r["position"], r["parent_hash"]) for r in recorded] == [("user", 0, None)]


async def test_a_store_that_is_down_leaves_the_chat_working(
    settings: Settings, gemini: FakeGemini, store: Store, vectors: InMemoryVectorStore
) -> None:
    gemini.reset()

    @asynccontextmanager
    async def closed_store(settings: Settings) -> AsyncIterator[Backends]:
        broken = await Store.open(store.dsn, schema=store.schema, max_size=1)
        await broken.close()
        yield Backends(broken, FakeEmbedder(dimension=16), vectors)

    with LiveServer(create_app(settings, backends=closed_store), name="echo-hooks") as live:
        async with httpx.AsyncClient(
            base_url=live.url, headers={"Authorization": "Bearer k"}, timeout=30
        ) as http:
            gemini.reply_text("Fine without the shadow.")
            history = [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello."},
                {"role": "user", "content": "Still there?"},
            ]
            answer, _ = await turn(http, history)
            assert answer.content == "Fine without the shadow."
            metrics = (await http.get("/metrics")).text
    for stage in ("restore", "record", "archive"):
        assert f'echo_shadow_failures_total{{reason="store",stage="{stage}"}}' in metrics


async def test_the_captured_inlet_gives_the_pipe_what_open_webui_strips(http: httpx.AsyncClient) -> None:
    request = json.loads((FIXTURES / "tool_flow" / "001_inlet.json").read_text())["body"]
    pipe_body = {**request["body"], "model": PIPE}
    answer = await http.post(f"/{PIPE}/filter/inlet", json={"body": pipe_body, "user": request["user"]})
    assert answer.status_code == 200
    context = answer.json()["echo_ctx"]
    metadata = request["body"]["metadata"]
    assert context["chat_id"] == metadata["chat_id"]
    assert context["user_id"] == request["user"]["id"]
    assert context["user_message_id"] == metadata["user_message_id"]
    assert context["message_id"] == metadata["message_id"]
    assert context["model"] == metadata["model"]["id"]
    assert context["user_position"] == 0
    assert len(context["user_invariant"]) == 64
    assert "metadata" in answer.json()  # the inlet adds its key and leaves the rest to Open WebUI


async def test_a_native_file_part_a_filter_added_is_restored_in_later_turns(
    http: httpx.AsyncClient, gemini: FakeGemini
) -> None:
    """echo_context (priority 0) runs before the pipe's inlet and adds the file as a native part; it
    says in echo_ctx what the message hashed before, which is what Open WebUI stores."""
    pdf = b"%PDF-1.4 native " + bytes(range(256)) * 8
    typed = {"role": "user", "content": "What does the contract say?"}
    native = {"type": "file", "file": {"file_data": "data:application/pdf;base64," + b64(pdf)}}
    received = {"role": "user", "content": [{"type": "text", "text": typed["content"]}, native]}
    before = shadow.message_invariant(typed)
    inlet_body = {
        "model": PIPE,
        "messages": [received],
        "metadata": {"user_id": USER["id"], "chat_id": "chat-n", "model": {"id": PIPE}},
        "echo_ctx": {"user_position": 0, "user_invariant": before},
    }
    inlet = await http.post(f"/{PIPE}/filter/inlet", json={"body": inlet_body, "user": USER})
    ctx = inlet.json()["echo_ctx"]
    assert ctx["user_invariant"] == before
    gemini.reply_text("It is a lease.")
    await turn(http, [received], chat_id="chat-n", echo_ctx=ctx)
    later = [
        typed,
        {"role": "assistant", "content": "It is a lease."},
        {"role": "user", "content": "Until when?"},
    ]
    gemini.reply_text("2030.")
    await turn(http, later, chat_id="chat-n")
    first = gemini.requests[-1].body["contents"][0]["parts"]
    assert first[0] == {"text": typed["content"]}
    assert signature_bytes(first[1]["inlineData"]["data"]) == pdf


async def test_model_placeholders_are_resolved_and_the_block_is_not_kept(
    http: httpx.AsyncClient, gemini: FakeGemini, store: Store
) -> None:
    block = (
        '<environnement_contexte>\nmodèle_actuel:   "##MODEL_ID##"\nmodèle_origine:  "##MODEL_ORIGIN##"\n'
        "</environnement_contexte>\n"
    )
    message = {"role": "user", "content": block + "Which model are you?"}
    inlet_body = {
        "model": PIPE,
        "messages": [message],
        "metadata": {"user_id": USER["id"], "chat_id": "chat-p", "model": {"id": "my-team-model"}},
    }
    ctx = (await http.post(f"/{PIPE}/filter/inlet", json={"body": inlet_body, "user": USER})).json()[
        "echo_ctx"
    ]
    gemini.reply_text("gemini-2.5-flash.")
    await turn(http, [message], chat_id="chat-p", echo_ctx=ctx)
    sent = gemini.requests[-1].body["contents"][0]["parts"][0]["text"]
    assert 'modèle_actuel:   "gemini-2.5-flash"' in sent
    assert 'modèle_origine:  "my-team-model"' in sent
    assert (
        await store.fetchval("SELECT count(*) FROM suture_index WHERE rich IS NOT NULL AND role = 'user'")
        == 0
    )


async def test_a_non_streamed_call_returns_the_tool_calls_in_the_message(
    http: httpx.AsyncClient, gemini: FakeGemini
) -> None:
    gemini.reply_function_calls(
        [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Bergen"})], SIG_CALL, text="Checking."
    )
    body = {
        "model": PIPE,
        "messages": [{"role": "user", "content": "Weather in Oslo and Bergen?"}],
        "tools": [WEATHER_TOOL],
        "user": USER,
    }
    answer = (await http.post("/chat/completions", json=body)).json()
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Checking."
    calls = choice["message"]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"city": "Oslo"}, {"city": "Bergen"}]
    assert all(c["id"].startswith("call_") and c["type"] == "function" for c in calls)
    # Open WebUI's follow-up: the text and both calls on one assistant message, then both results.
    history = [
        *body["messages"],
        {"role": "assistant", "content": "Checking.", "tool_calls": as_openwebui_replays(calls)},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "snow"},
        {"role": "tool", "tool_call_id": calls[1]["id"], "content": "rain"},
    ]
    gemini.reply_text("Snow in Oslo, rain in Bergen.")
    follow = (await http.post("/chat/completions", json={**body, "messages": history})).json()
    assert follow["choices"][0]["message"]["content"] == "Snow in Oslo, rain in Bergen."
    sent = gemini.requests[-1].body["contents"]
    assert [p.get("text") or p["functionCall"]["args"]["city"] for p in sent[1]["parts"]] == [
        "Checking.",
        "Oslo",
        "Bergen",
    ]
    assert signed(sent[1]["parts"][1]) == SIG_CALL
    assert [p["functionResponse"]["response"]["result"] for p in sent[2]["parts"]] == ["snow", "rain"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools[0].function.name"),
        (
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {
                        "role": "assistant",
                        "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{"}}],
                    },
                    {"role": "tool", "tool_call_id": "c", "content": "y"},
                ]
            },
            "messages[1].tool_calls[0].function.arguments",
        ),
    ],
)
async def test_a_malformed_body_is_a_422_naming_the_field_and_stores_nothing(
    http: httpx.AsyncClient, store: Store, extra: dict[str, Any], field: str
) -> None:
    body = {"model": PIPE, "messages": [{"role": "user", "content": "x"}], "user": USER, **extra}
    answer = await http.post("/chat/completions", json=body)
    assert answer.status_code == 422
    assert field in answer.json()["detail"]["message"]
    assert await rows(store, "suture_index") == 0


async def test_a_nul_and_a_lone_surrogate_in_a_turn_are_stored_and_found_again(
    http: httpx.AsyncClient, gemini: FakeGemini, store: Store, vectors: InMemoryVectorStore
) -> None:
    """PostgreSQL refuses NUL and lone surrogates: the shadow stores U+FFFD in their place, keyed by
    the hash of the original text, so the next turn still finds the turn's rows (call, result and
    signatures). A lone surrogate from Gemini is replaced before anything else sees it."""
    question = [{"role": "user", "content": "What is\x00 my dog's name?"}]
    gemini.reply_function_calls([("search_memories", {"query": "dog\x00 name \ud800"})], SIG_CALL)
    gemini.reply_text(
        "Your dog\x00 \ud800 is Pixel.", thought="thinking \udc00", thought_signature=SIG_ANSWER
    )
    answer, _ = await turn(http, question)
    # UTF-8 carries a NUL: sent on as it is; a lone surrogate it cannot carry: U+FFFD.
    assert (answer.content, answer.reasoning) == ("Your dog\x00 \ufffd is Pixel.", "thinking \ufffd")
    journal = await store.fetchrow("SELECT arguments FROM tool_journal WHERE user_id = $1", USER["id"])
    assert journal is not None
    assert journal["arguments"] == {"query": "dog\ufffd name \ufffd"}

    gemini.reply_text("You are welcome.")
    history = [
        *question,
        {"role": "assistant", "content": answer.content},
        {"role": "user", "content": "Thanks\x00"},
    ]
    await turn(http, history)
    sent = gemini.requests[-1].body["contents"]
    assert [c["role"] for c in sent] == ["user", "model", "user", "model", "user"]
    # The call as Gemini wrote it (its rich form keeps the arguments' JSON text, where a NUL is an
    # escape PostgreSQL's json type keeps), the lone surrogate replaced.
    assert sent[1]["parts"][0]["functionCall"]["args"] == {"query": "dog\x00 name \ufffd"}
    assert signed(sent[1]["parts"][0]) == SIG_CALL
    *_, said = sent[3]["parts"]  # after the thought, the text that carries the signature
    assert said["text"] == answer.content
    assert signed(said) == SIG_ANSWER
