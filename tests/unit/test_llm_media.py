"""Media in an LLM request (transcription of attachments): where Gemini gets them, and the providers
that read none say so with a permanent error."""

from __future__ import annotations

import pytest

from echo.adapters.llm import errors, gemini, offline, openai_compatible
from echo.ports.llm import LLMRequest, Media

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def request(**changed: object) -> LLMRequest:
    fields: dict[str, object] = {
        "model": "gemini-2.5-flash",
        "messages": [("user", "context"), ("assistant", "ok"), ("user", "Describe it.")],
        "media": [Media("image/png", PNG)],
        **changed,
    }
    return LLMRequest(**fields)  # type: ignore[arg-type]


def test_gemini_puts_the_media_before_the_last_user_text() -> None:
    _, contents, _ = gemini.GeminiLLM.build(request())
    last = contents[-1]
    assert last.role == "user"
    assert last.parts is not None
    assert last.parts[0].inline_data is not None
    assert (last.parts[0].inline_data.mime_type, last.parts[0].inline_data.data) == ("image/png", PNG)
    assert last.parts[1].text == "Describe it."
    assert contents[0].parts is not None
    assert len(contents[0].parts) == 1


@pytest.mark.parametrize(
    ("changed", "field"),
    [
        ({"media": [Media("image/png", PNG)], "messages": [("assistant", "x")]}, "media"),
    ],
)
def test_media_need_a_user_message(changed: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        request(**changed)


def test_a_media_value_is_checked() -> None:
    with pytest.raises(ValueError, match="mime_type"):
        Media("png", PNG)
    with pytest.raises(ValueError, match="data"):
        Media("image/png", b"")


async def test_providers_that_read_no_media_fail_for_good() -> None:
    with pytest.raises(errors.LLMError, match="offline provider reads no images") as failed:
        await offline.OfflineLLM().generate(request())
    assert failed.value.retryable is False
    client = openai_compatible.OpenAICompatibleLLM("http://127.0.0.1:9/v1", None)
    try:
        with pytest.raises(errors.LLMError, match="no images, audio or video") as refused:
            await client.generate(request())
        assert refused.value.retryable is False
    finally:
        await client.aclose()
