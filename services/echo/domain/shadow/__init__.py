"""The rich shadow (seed 001), the domain: pure, no I/O.

Open WebUI's history is volatile: it drops what filters injected, thought signatures and every
extra field of a tool call, and re-serialises tool arguments. The shadow keeps, per user and per
point of a conversation (its ``echo.domain.chain`` cumulative hash), the rich form of each message, and the
pipe puts it back before every Gemini call. This package decides; ``echo.adapters.store.shadow`` stores and
``echo.capabilities.shadow.turn`` runs a turn.

- ``points``: the history's points on the chain (system messages off it; the current user message
  as the pipe's inlet hashed it);
- ``parts``: Gemini contents as plain data and their stored form (skeleton, payloads stored once,
  signatures bytes exact, tool journal);
- ``suture``: which stored forms to restore where, and what was hit or missed;
- ``steps``: one streamed model step folded into a content; placeholder signatures for the current
  turn's steps the shadow could not restore;
- ``archive``: what to store of a turn (the user's message before the call, the answer after it);
- ``context``: the pipe inlet's ``echo_ctx`` and the ``##MODEL_ID##`` / ``##MODEL_ORIGIN##`` placeholders.
"""

from echo.domain.shadow.archive import PointRecord, model_record, strip_per_turn_blocks, user_record
from echo.domain.shadow.context import ECHO_CTX_KEY, EchoContext, from_inlet, resolve_placeholders
from echo.domain.shadow.parts import (
    ContentDict,
    Dehydrated,
    JournalEntry,
    PartDict,
    Payload,
    Signature,
    UnreadableShadow,
    dehydrate,
    hydrate,
    payload_hash,
)
from echo.domain.shadow.points import (
    CurrentMessage,
    Point,
    PointsMemo,
    conversation_points,
    message_invariant,
)
from echo.domain.shadow.steps import PLACEHOLDER_SIGNATURE, StepBuilder, sign_current_turn
from echo.domain.shadow.suture import KINDS, StoredPoint, Suture, plan_suture

__all__ = [
    "ECHO_CTX_KEY",
    "KINDS",
    "PLACEHOLDER_SIGNATURE",
    "ContentDict",
    "CurrentMessage",
    "Dehydrated",
    "EchoContext",
    "JournalEntry",
    "PartDict",
    "Payload",
    "Point",
    "PointRecord",
    "PointsMemo",
    "Signature",
    "StepBuilder",
    "StoredPoint",
    "Suture",
    "UnreadableShadow",
    "conversation_points",
    "dehydrate",
    "from_inlet",
    "hydrate",
    "message_invariant",
    "model_record",
    "payload_hash",
    "plan_suture",
    "resolve_placeholders",
    "sign_current_turn",
    "strip_per_turn_blocks",
    "user_record",
]
