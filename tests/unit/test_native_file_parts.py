"""The native parts echo_context adds for echo.* pipes (OpenAI `file` parts with a data URL) reach
Gemini as inline data of their own type, in their place among the user's parts."""

from __future__ import annotations

import base64

from echo.domain import openai_to_gemini


def test_a_file_part_becomes_inline_data_in_order() -> None:
    wav = b"RIFF\x00\x00\x00\x00WAVEfmt "
    url = "data:audio/wav;base64," + base64.b64encode(wav).decode()
    contents, _ = openai_to_gemini.to_gemini_contents(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Transcribe:"},
                    {"type": "file", "file": {"filename": "voice.wav", "file_data": url}},
                    {"type": "file", "file": {"file_id": "remote-only"}},  # no data: nothing to send
                ],
            }
        ]
    )
    parts = contents[0]["parts"]
    assert parts[0] == {"text": "Transcribe:"}
    assert parts[1] == {"inline_data": {"mime_type": "audio/wav", "data": wav}}
    assert len(parts) == 2
