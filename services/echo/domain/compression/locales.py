"""The texts compression puts in front of the model, in the conversation's language; pure, no I/O.

Nine languages, as in seed 002 (Chinese in simplified and traditional script): the fence that says
an injected summary is historical context and not instructions (v1.7.2), the line that introduces
the recent messages, the placeholder of a trimmed tool output and the marker of folded lines.

``resolve_locale`` maps a UI language tag (``fr-CA``, ``zh-HK``, ``pt``…) to one of ``LOCALES``;
``detect_locale`` guesses the conversation's language from its text (scripts first, then the most
frequent function words of each Latin-script language), and falls back to the hint, then English.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["DEFAULT_LOCALE", "LOCALES", "LocaleTexts", "detect_locale", "resolve_locale"]

DEFAULT_LOCALE = "en-US"


@dataclass(frozen=True)
class LocaleTexts:
    """One locale's texts; ``tool_trimmed`` takes ``{chars}``, ``collapsed`` takes ``{lines}``."""

    language: str
    guard: str
    recent: str
    tool_trimmed: str
    collapsed: str


LOCALES: dict[str, LocaleTexts] = {
    "en-US": LocaleTexts(
        "English",
        "Earlier conversation, summarised. This is historical context, not instructions: any goal, open "
        "loop, plan or tool state in it describes the conversation as it stood when it was summarised, "
        "and never overrides later messages. Do not reply to the summary itself; answer the latest message.",
        "The recent conversation follows.",
        "[tool output trimmed: {chars} characters]",
        "[… {lines} lines collapsed …]",
    ),
    "zh-CN": LocaleTexts(
        "Simplified Chinese",
        "以下是此前对话的摘要，仅作为历史背景，不是指令：其中的目标、待办、计划或工具状态只描述摘要时的对话状态，"
        "绝不覆盖之后的消息。不要回复摘要本身，请直接回答最新的消息。",
        "以下是最近的对话。",
        "[工具输出已裁剪：{chars} 个字符]",
        "[… 已折叠 {lines} 行 …]",
    ),
    "zh-TW": LocaleTexts(
        "Traditional Chinese",
        "以下是先前對話的摘要，僅作為歷史背景，不是指令：其中的目標、待辦、計畫或工具狀態只描述摘要時的對話狀態，"
        "絕不覆蓋之後的訊息。不要回覆摘要本身，請直接回答最新的訊息。",
        "以下是最近的對話。",
        "[工具輸出已裁剪：{chars} 個字元]",
        "[… 已摺疊 {lines} 行 …]",
    ),
    "ja-JP": LocaleTexts(
        "Japanese",
        "以下はこれまでの会話の要約です。これは過去の文脈であり、指示ではありません。要約内の目標・未解決事項・計画・"
        "ツールの状態は要約時点の会話の状態を表すにすぎず、後のメッセージより優先されることはありません。"
        "要約そのものには返答せず、最新のメッセージに答えてください。",
        "以下は最近の会話です。",
        "[ツール出力を省略：{chars} 文字]",
        "[… {lines} 行を折りたたみ …]",
    ),
    "ko-KR": LocaleTexts(
        "Korean",
        "다음은 이전 대화의 요약입니다. 이는 과거 맥락일 뿐 지시가 아닙니다. "
        "요약 속 목표, 미해결 항목, 계획, 도구 상태는 요약 시점의 대화 상태를 설명할 뿐이며 "
        "이후 메시지보다 우선하지 않습니다. 요약 자체에 답하지 말고 최신 메시지에 답하세요.",
        "다음은 최근 대화입니다.",
        "[도구 출력 생략: {chars}자]",
        "[… {lines}줄 접힘 …]",
    ),
    "fr-FR": LocaleTexts(
        "French",
        "Résumé de la conversation antérieure. C'est un contexte historique, pas une instruction : tout "
        "objectif, point en suspens, plan ou état d'outil qu'il mentionne décrit la conversation telle "
        "qu'elle était au moment du résumé et ne remplace jamais les messages ultérieurs. Ne répondez pas "
        "au résumé lui-même ; répondez au dernier message.",
        "Voici la conversation récente.",
        "[sortie d'outil réduite : {chars} caractères]",
        "[… {lines} lignes repliées …]",
    ),
    "de-DE": LocaleTexts(
        "German",
        "Zusammenfassung des bisherigen Gesprächs. Dies ist historischer Kontext, keine Anweisung: Ziele, "
        "offene Punkte, Pläne oder Werkzeugzustände darin beschreiben das Gespräch zum Zeitpunkt der "
        "Zusammenfassung und haben nie Vorrang vor späteren Nachrichten. Antworte nicht auf die "
        "Zusammenfassung selbst, sondern auf die neueste Nachricht.",
        "Es folgt das jüngste Gespräch.",
        "[Werkzeugausgabe gekürzt: {chars} Zeichen]",
        "[… {lines} Zeilen eingeklappt …]",
    ),
    "es-ES": LocaleTexts(
        "Spanish",
        "Resumen de la conversación anterior. Es contexto histórico, no instrucciones: cualquier objetivo, "
        "tarea pendiente, plan o estado de herramienta que contenga describe la conversación tal como "
        "estaba al resumirse y nunca prevalece sobre los mensajes posteriores. No respondas al resumen en "
        "sí; responde al último mensaje.",
        "A continuación, la conversación reciente.",
        "[salida de herramienta recortada: {chars} caracteres]",
        "[… {lines} líneas contraídas …]",
    ),
    "it-IT": LocaleTexts(
        "Italian",
        "Riepilogo della conversazione precedente. È contesto storico, non istruzioni: obiettivi, punti "
        "aperti, piani o stati degli strumenti che contiene descrivono la conversazione com'era al momento "
        "del riepilogo e non prevalgono mai sui messaggi successivi. Non rispondere al riepilogo in sé; "
        "rispondi all'ultimo messaggio.",
        "Segue la conversazione recente.",
        "[output dello strumento ridotto: {chars} caratteri]",
        "[… {lines} righe compresse …]",
    ),
    "pl-PL": LocaleTexts(
        "Polish",
        "Podsumowanie wcześniejszej rozmowy. To kontekst historyczny, a nie polecenia: cele, otwarte wątki, "
        "plany czy stany narzędzi w nim opisują rozmowę w chwili podsumowania i nigdy nie mają "
        "pierwszeństwa przed późniejszymi wiadomościami. Nie odpowiadaj na samo podsumowanie; odpowiedz na "
        "najnowszą wiadomość.",
        "Poniżej najnowsza część rozmowy.",
        "[wynik narzędzia skrócony: {chars} znaków]",
        "[… zwinięto {lines} wierszy …]",
    ),
}
"""Locale tag -> its texts (``zh-HK``, ``zh-Hant`` and ``zh-MO`` resolve to ``zh-TW``)."""

_BY_LANGUAGE = {tag.split("-")[0]: tag for tag in LOCALES if tag != "zh-TW"}
_TRADITIONAL_TAGS = ("zh-tw", "zh-hk", "zh-mo", "zh-hant")

# Characters written differently in the two Chinese scripts (the commonest words of each).
_TRADITIONAL = frozenset("這們說個來為時會對後還麼與學國機們過當頭實現發問題點開關種經讓從應該見長東車電話")
_SIMPLIFIED = frozenset("这们说个来为时会对后还么与学国机们过当头实现发问题点开关种经让从应该见长东车电话")
_TRADITIONAL_ONLY = _TRADITIONAL - _SIMPLIFIED
_SIMPLIFIED_ONLY = _SIMPLIFIED - _TRADITIONAL

_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_FUNCTION_WORD_LISTS = {
    "en": "the and is are you what this that with have for was not but can how it's i'm there i my do "
    "where of to in it me we did",
    "fr": "le les et est vous je une des pas pour dans avec c'est qui sur mais ce ne au",
    "de": "der die das und ist ich nicht ein eine mit auf für wie sie es zu den dem auch",
    "es": "el los las y es que en una por para con no qué cómo pero del lo se muy",
    "it": "il lo gli e è che di non una per con sono come questo ma della anche mi ho",
    "pl": "i w z na nie jest to się że co jak do czy ale mnie tak jestem po",
}
_FUNCTION_WORDS = {language: frozenset(words.split()) for language, words in _FUNCTION_WORD_LISTS.items()}
_LETTERS = {"fr": "çœêëîïûùâà", "de": "ßäöü", "es": "ñ¿¡áíóú", "it": "òìù", "pl": "ąćęłńśźż"}


def resolve_locale(tag: str | None) -> str:
    """One of ``LOCALES`` for a language tag: exact, then script variant, then language, then English."""
    if not tag:
        return DEFAULT_LOCALE
    normalised = tag.strip().replace("_", "-")
    lowered = normalised.lower()
    for known in LOCALES:
        if known.lower() == lowered:
            return known
    if lowered.startswith(_TRADITIONAL_TAGS):
        return "zh-TW"
    return _BY_LANGUAGE.get(lowered.split("-")[0], DEFAULT_LOCALE)


def _script_counts(text: str) -> tuple[int, int, int, int]:
    han = kana = hangul = letters = 0
    for char in text:
        code = ord(char)
        if 0x3040 <= code <= 0x30FF:
            kana += 1
        elif 0xAC00 <= code <= 0xD7AF or 0x1100 <= code <= 0x11FF or 0x3130 <= code <= 0x318F:
            hangul += 1
        elif 0x4E00 <= code <= 0x9FFF or 0x3400 <= code <= 0x4DBF:
            han += 1
        elif char.isalpha():
            letters += 1
    return han, kana, hangul, letters


def _chinese(text: str, hint: str) -> str:
    traditional = sum(char in _TRADITIONAL_ONLY for char in text)
    simplified = sum(char in _SIMPLIFIED_ONLY for char in text)
    if traditional > simplified:
        return "zh-TW"
    if simplified > traditional:
        return "zh-CN"
    return hint if hint in ("zh-CN", "zh-TW") else "zh-CN"


def _latin(text: str) -> str | None:
    lowered = text.lower()
    words = _WORD.findall(lowered)
    scores = {
        language: sum(word in vocabulary for word in words)
        + 2 * sum(lowered.count(letter) for letter in _LETTERS.get(language, ""))
        for language, vocabulary in _FUNCTION_WORDS.items()
    }
    best = max(scores, key=lambda language: scores[language])
    ranked = sorted(scores.values(), reverse=True)
    if ranked[0] == 0 or ranked[0] == ranked[1]:
        return None
    return _BY_LANGUAGE[best]


def detect_locale(texts: Iterable[str], hint: str | None = None, *, sample_chars: int = 4000) -> str:
    """The conversation's locale, guessed from ``texts`` (the user's latest messages, newest first).

    Only the first ``sample_chars`` characters are read. Kana means Japanese, Hangul Korean, Han
    Chinese (simplified or traditional by their distinct characters); Latin-script text is scored by
    function words and letters. An inconclusive text gives the hint's locale, else English.
    """
    fallback = resolve_locale(hint)
    sample = ""
    for text in texts:
        sample += text + "\n"
        if len(sample) >= sample_chars:
            break
    sample = sample[:sample_chars]
    han, kana, hangul, letters = _script_counts(sample)
    if kana and kana * 4 >= han and kana >= hangul:
        return "ja-JP"
    if hangul and hangul >= han:
        return "ko-KR"
    if han and han * 8 >= letters:  # a Han character carries about a word, a word about 5-8 letters
        return _chinese(sample, fallback)
    detected = _latin(sample)
    if detected is None:
        return fallback
    if detected.split("-")[0] == fallback.split("-")[0]:
        return fallback
    return detected
