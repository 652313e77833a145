"""`echoctl replay`: a recorded conversation played through the filters, turn by turn.

- ``transcripts`` (pure, no I/O): an Open WebUI chat export (one chat, or the list the UI downloads)
  or a LoCoMo conversation as plain data: messages, exchanges (what the user sent, what the
  assistant answered), and for LoCoMo its questions with the dialog turns that hold each answer.
- ``driver``: the thin part with I/O. Each exchange goes through the filters as Open WebUI would send
  it (inlet with the history, the recorded reply as the assistant's answer, outlet), the job worker
  of the process runs the summaries they enqueue before the next turn, and every turn is measured:
  tokens Open WebUI would send without ECHO, tokens sent with it.
- ``tables`` (pure): the per-turn table; ``plot``: the PNG of context size per turn (matplotlib).
"""

from echo.domain.transcripts import Exchange, Message, Question, Transcript, TranscriptError, parse

__all__ = ["Exchange", "Message", "Question", "Transcript", "TranscriptError", "parse"]
