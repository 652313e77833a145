"""Is a window worth distilling? Greetings, thanks and small talk are not (mem0's audits found most
stored memories were such junk). Pure.

A window is worth it when its cleaned text holds at least ``MIN_CONTENT_WORDS`` distinct content
words: words of three letters or more that are neither function words nor small talk (English,
French, Spanish, German, Italian, Portuguese), numbers, and, for scripts written without spaces
(Chinese, Japanese), one word per two characters. This only saves the LLM call for windows that
cannot hold a fact; the distillation itself may still answer that a window holds nothing to keep.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from echo.domain.memory import cleaning

__all__ = ["MIN_CONTENT_WORDS", "content_words", "is_worth_distilling"]

MIN_CONTENT_WORDS = 6

_WORD = re.compile(r"[^\W\d_]{3,}|\d+(?:[.,:/]\d+)*", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{2,}")
_SMALL_TALK_CJK = frozenset(
    {"你好", "谢谢", "再见", "您好", "不客气", "早上好", "晚上好", "こんにちは", "ありがとう"}
)

_SMALL_TALK_WORDS = """
hello hey hiya hii howdy greetings welcome thanks thank thx cheers bye goodbye later soon see
good great nice fine okay okey yes yeah yep nope sure please sorry glad happy pleasure cool
awesome wonderful fantastic amazing perfect lol haha hahaha hehe wow oops alright right well
morning evening night afternoon day today tonight tomorrow help helping assist assistance
anything everything something else more much very really too also just again still talk chat
meet hear hope doing going how what when where which who why whom whose can could would should
will shall may might must need want like love know think feel let get got have has had having
does did done doing make made see say said tell told ask asked there here this that these those
then than them they their theirs you your yours yourself the and but for not are was were been
being with from into onto about over under all any some each every both few many most other such
own same only our ours ourselves she her hers herself him his himself its itself one ones mine
myself who's it's i'm you're that's what's don't doesn't didn't can't won't isn't aren't wasn't
let's i've you've we're they're bonjour salut coucou merci bonsoir bonne journée soirée revoir
plaisir oui non bien très aussi alors donc avec pour dans sur pas mais vous nous ils elles leur
votre notre cette ces ça cela comment quoi quel quelle être avoir fait faire peux pouvez voulez
aider aide rien tout hola gracias adiós buenos buenas días noches por favor bueno muy también
cómo qué hallo danke tschüss guten morgen abend bitte gut sehr auch wie was ciao grazie
buongiorno buonasera prego bene molto anche come cosa olá obrigado obrigada tchau bom boa dia
noite tudo bem muito também como
"""
_SMALL_TALK = frozenset(_SMALL_TALK_WORDS.split())


def content_words(messages: Sequence[cleaning.CleanMessage]) -> set[str]:
    """The distinct content words of the messages' texts and file names (lower-cased)."""
    words: set[str] = set()
    for message in messages:
        text = "\n".join([message.text, *message.files])
        for word in _WORD.findall(text):
            lowered = word.lower()
            if lowered not in _SMALL_TALK:
                words.add(lowered)
        for run in _CJK.findall(text):
            if run in _SMALL_TALK_CJK:
                continue
            words.update(run[i : i + 2] for i in range(0, len(run) - 1, 2))
    return words


def is_worth_distilling(messages: Sequence[cleaning.CleanMessage], minimum: int = MIN_CONTENT_WORDS) -> bool:
    """Whether the window may hold something worth remembering (see the module docstring)."""
    return len(content_words(messages)) >= minimum
