"""Text heuristics of the offline provider. Pure, deterministic, no I/O (token counts:
``echo.domain.tokens``).

An extractive summary keeps the input's most informative sentences, in their original order and
after who said them. A transcript line that starts with a speaker label (``[3] User:``,
``assistant:``, ``[4] Assistant: Ana:``) opens a message, the lines after it continue it, and each
chosen sentence is shown after its message's label (without the ``[n]`` number), one line per
message. A sentence scores the sum, over its distinct content words, of their inverse sentence
frequency (specific words weigh most) slightly raised by how often they recur, divided by the square
root of its length so that long sentences do not win by size alone; numbers, dates and proper nouns
raise it. Small talk (greetings, thanks, acknowledgements, exclamations with almost no content word,
in English, French and a few other languages) is left out while informative sentences remain, and
near-identical sentences are kept once. Sentences are taken best first while they fit the budget,
which is counted in o200k_base tokens, labels, spaces and line breaks included: the estimate while
choosing, then the exact count of the result, dropping the weakest sentence until it fits.
``size`` counts words, each CJK character counting as one (about a token each).
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from echo.domain import tokens

__all__ = ["importance", "keywords", "sentences", "size", "slug", "summarize"]

_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])")
_CJK_STOPS = ("。", "！", "？", "；")
_UNIT = re.compile(rf"{_CJK.pattern}|(?:(?!{_CJK.pattern})\S)+")  # what ``size`` counts as one word
_MIN_SCORED_WORDS = 6  # sentences shorter than this are scored as if this long: greetings do not win
_HEADER = re.compile(
    r"(?:\[\d+\][ \t]*[^\W\d_][^:\n]{0,39}?[ \t]*:"  # [3] User:  [5] Tool result (search):
    r"|(?i:user|assistant|system|human|ai|bot|tool(?: result)?)(?:[ \t]*\([^)\n]{0,40}\))?[ \t]*:)"
    r"(?:[ \t]+[A-Z][\w'’.-]*(?:[ \t][A-Z][\w'’.-]*){0,2}[ \t]*:(?=[ \t]))?[ \t]*"  # then a name: "Ana:"
)
_NUMBER = re.compile(r"^\[\d+\][ \t]*")
_MARKUP_LINE = re.compile(r"</?[A-Za-z][\w:.-]*(?:\s[^<>]*)?/?>")
_DIGIT = re.compile(r"\d")
_PROPER = re.compile(
    r"(?:(?<=[^\W\d_] )|(?<=[^\W\d_], ))([A-Z][a-z][\w'’-]*)"
)  # a capitalised word inside a sentence
_COMMON_SHARE = 0.15  # a word in more sentences than this share of them (names, the topic) is not news
_COMMON_MIN_SENTENCES = 20
_DUPLICATE = 0.8  # content-word Jaccard from which two sentences say the same
_DATE_TEXT = """
    today yesterday tomorrow tonight week weekend month year monday tuesday wednesday thursday friday
    saturday sunday january february march april june july august september october november
    december aujourd'hui hier demain semaine mois année lundi mardi mercredi jeudi vendredi samedi
    dimanche janvier février mars avril mai juin juillet août septembre octobre novembre décembre
"""
_DATE_WORDS = frozenset(_DATE_TEXT.split())
_SMALL_TALK_TEXT = """
    hi hello hey hiya howdy yo bye goodbye morning evening afternoon welcome bonjour bonsoir salut
    coucou revoir hola adios adiós ciao hallo tschüss thanks thank thx cheers appreciate appreciated
    merci gracias danke grazie obrigado ok okay alright sure yeah yep yup nope right indeed absolutely
    totally exactly definitely certainly agreed noted gotcha understood d'accord parfait entendu compris
    exactement absolument vale wow cool great good nice awesome amazing wonderful fantastic lovely sweet
    beautiful incredible brilliant perfect excellent super génial genial chouette bravo congrats
    congratulations félicitations glad happy excited proud fun funny interesting impressive inspiring
    touching thrilled sorry hope pleasure haha hahaha lol lmao omg aw aww hmm um uh well wait really
    just actually anyway anyways truly
"""
_SMALL_TALK = frozenset(_SMALL_TALK_TEXT.split())
_SMALL_TALK_PHRASES = re.compile(
    r"\b(?:take care|see you(?: soon| later)?|talk (?:soon|later)|no (?:problem|worries)|you'?re welcome"
    r"|of course|sounds good|de rien|avec plaisir|à bientôt|bonne (?:journée|soirée)"
    r"|good (?:luck|job|night))\b"
)
_STOPWORD_TEXT = """
    a about above after again all also am an and any are as at be because been before being below
    between both but by can could did do does doing done down during each few for from further had has
    have having he her here hers him his how i if in into is it its just like may me might more most
    must my no nor not now of off on once only or other our ours out over own same she should so some
    such than that the their theirs them then there these they this those through to too under until
    up very was we were what when where which while who whom why will with would you your yours yes ok
    okay please thanks thank hello hi hey user assistant system that's it's i'm i've i'd i'll you're
    you've we're they're don't doesn't didn't can't won't isn't wasn't let's really know think get got
    going gonna lot thing things something much many even still also well yeah
    au aux avec ce ces cette dans de des du elle elles en est et été être il ils je la le les leur
    leurs lui ma mais me même mes moi mon ne nos notre nous on ou où par pas pour qu que qui sa se ses
    son sur ta te tes toi ton tu un une vos votre vous ça c'est j'ai d'un d'une l'on n'est qu'il aussi
    comme donc alors très plus tout tous toute toutes avoir fait faire peut sont était oui non merci
    bonjour salut
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_CUES = (
    "important", "critical", "critique", "crucial", "urgent", "essential", "essentiel", "never",
    "always", "jamais", "toujours", "remember", "souviens", "rappelle", "deadline", "échéance",
    "decided", "decision", "décidé", "décision", "prefer", "préfère", "allerg", "password",
    "mot de passe", "must", "doit", "require", "exige", "security", "sécurité", "production",
    "重要", "记住", "必须", "决定", "总是", "永远", "偏好", "喜欢",
)  # fmt: skip
_PERSONAL = (
    "my name", "je m'appelle", "i live", "j'habite", "i work", "je travaille", "my wife", "my husband",
    "ma femme", "mon mari", "my birthday", "mon anniversaire", "i am allergic", "je suis allergique",
)  # fmt: skip


def size(text: str) -> int:
    """Length in words, each CJK character counting as one word."""
    return len(_UNIT.findall(text))


def sentences(text: str) -> list[str]:
    """Non-empty sentences, line breaks and sentence punctuation (Latin or CJK) ending one."""
    out: list[str] = []
    for line in text.splitlines():
        out.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return out


def _content_words(text: str) -> list[str]:
    """Lower-cased words minus stop words, digits and words under 3 letters; CJK runs as bigrams."""
    out: list[str] = []
    for word in (w.lower() for w in _WORD.findall(text)):
        if _CJK.search(word):
            out.extend(_bigrams(word))
        elif word not in _STOPWORDS and not word.isdigit() and len(word) > 2:
            out.append(word)
    return out


def _bigrams(word: str) -> list[str]:
    """Unsegmented CJK text as overlapping character pairs (each pair a rough word)."""
    runs = re.findall(f"{_CJK.pattern}+", word)
    return [run[i : i + 2] for run in runs for i in range(max(len(run) - 1, 1))]


def _join(parts: list[str]) -> str:
    """Sentences joined by a space, or by nothing after CJK punctuation."""
    out = ""
    for part in parts:
        out += part if not out or out.endswith(_CJK_STOPS) else " " + part
    return out


@dataclass(frozen=True)
class _Sentence:
    """One sentence of the input, with the message it belongs to and who said it (``""`` unknown)."""

    text: str
    message: int
    speaker: str


def _parse(text: str) -> list[_Sentence]:
    """The sentences of ``text``, each with its message: a line that starts with a speaker label opens
    one, the lines after it continue it, and a markup-only line (``<conversation>``) closes it."""
    out: list[_Sentence] = []
    message, speaker, open_message = -1, "", False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if _MARKUP_LINE.fullmatch(line):
            open_message = False
            continue
        header = _HEADER.match(line)
        if header:
            message += 1
            speaker = _NUMBER.sub("", header.group(0)).strip()
            open_message = True
            line = line[header.end() :]
        elif not open_message:
            message += 1
            speaker = ""
        out.extend(_Sentence(s, message, speaker) for s in sentences(line))
    return out


def _render(parts: list[_Sentence], labelled: bool) -> str:
    """Sentences in their order: one line per message after its speaker, or plain prose."""
    if not labelled:
        return _join([p.text for p in parts])
    lines: list[str] = []
    last = None
    for part in parts:
        if part.message == last:
            lines[-1] = _join([lines[-1], part.text])
        else:
            lines.append(f"{part.speaker} {part.text}" if part.speaker else part.text)
        last = part.message
    return "\n".join(lines)


def _tokens(text: str) -> int:
    """o200k_base tokens of ``text``: exact when the tokenizer is there, else the estimate."""
    try:
        return tokens.exact_tokens(text)
    except tokens.TokenizerUnavailable:  # pragma: no cover - the wheel ships with the service
        return tokens.estimate_tokens(text)


def _is_small_talk(text: str, substantive: int, has_number: bool) -> bool:
    """Greetings, thanks, acknowledgements and exclamations that carry (almost) no content."""
    if has_number:
        return False
    if substantive < 2:
        return True
    first = _WORD.search(text)
    opener = first is not None and first.group(0).lower() in _SMALL_TALK
    return substantive < 3 and (opener or text.rstrip().endswith("!"))


def _score(parts: list[_Sentence]) -> tuple[list[float], list[bool], list[frozenset[str]]]:
    """Informativeness of each sentence, whether it is small talk, and its content words.

    A content word weighs its inverse sentence frequency (rare, specific words count most), slightly
    raised by how often it recurs; a sentence scores the sum over its distinct content words divided
    by the square root of its length, raised by numbers and dates and by proper nouns."""
    words = [[w for w in _content_words(p.text) if w not in _SMALL_TALK] for p in parts]
    n = len(parts)
    frequency = Counter(w for ws in words for w in ws)
    spread = Counter(w for ws in words for w in set(ws))
    weight = {w: math.log((n + 1) / spread[w]) * (1.0 + 0.25 * math.log(frequency[w])) for w in frequency}
    common = {w for w in spread if n >= _COMMON_MIN_SENTENCES and spread[w] > _COMMON_SHARE * n}
    scores: list[float] = []
    small: list[bool] = []
    for part, ws in zip(parts, words, strict=True):
        distinct = frozenset(ws)
        has_number = bool(_DIGIT.search(part.text))
        dated = has_number or bool(_DATE_WORDS.intersection(w.lower() for w in _WORD.findall(part.text)))
        names = {m.group(1) for m in _PROPER.finditer(part.text) if m.group(1).lower() not in _STOPWORDS}
        score = sum(weight[w] for w in distinct) / math.sqrt(max(len(ws), _MIN_SCORED_WORDS))
        score *= (1.25 if dated else 1.0) * (1.0 + 0.1 * min(len(names), 3))
        scores.append(score)
        plain = _SMALL_TALK_PHRASES.sub(" ", part.text.lower())  # "no problem" says nothing of a problem
        substantive = {w for w in _content_words(plain) if w not in _SMALL_TALK} - common
        small.append(_is_small_talk(plain, len(substantive), has_number))
    return scores, small, [frozenset(ws) for ws in words]


def _similar(a: frozenset[str], b: frozenset[str]) -> bool:
    """Near-identical by content words (Jaccard at least ``_DUPLICATE``)."""
    return bool(a) and bool(b) and len(a & b) >= _DUPLICATE * len(a | b)


_DATA_BLOCK = re.compile(r"^<([a-z_]+)>\n(.*)^</\1>$", re.M | re.S)
_TAG_LINE = re.compile(r"^</?[a-z_]+>$", re.M)


def material(prompt: str) -> str:
    """What a prompt hands over to be read: the inside of its data blocks (`<conversation>…</conversation>`,
    a `<compression_input>` and what it nests), without the instructions around them; the whole text when
    it has none. The offline provider summarises this, never the instructions."""
    blocks = [match.group(2) for match in _DATA_BLOCK.finditer(prompt)]
    if not blocks:
        return prompt
    return "\n".join(_TAG_LINE.sub("", block).strip("\n") for block in blocks)


def summarize(text: str, max_tokens: int) -> str:
    """The most informative sentences of ``text``, in their order with who said them, within
    ``max_tokens`` o200k_base tokens (speaker labels, spaces and line breaks included).

    Small talk is left out while informative sentences remain, near-identical sentences are kept
    once, and when not even the best sentence fits it is cut, with "…"."""
    parts = _parse(text)
    labelled = any(p.speaker for p in parts)
    whole = _render(parts, labelled)
    if max_tokens < 1 or not parts:
        return "" if max_tokens < 1 else whole
    if tokens.estimate_tokens(whole) <= 2 * max_tokens and _tokens(whole) <= max_tokens:
        return whole
    scores, small, signatures = _score(parts)
    informative = [i for i in range(len(parts)) if scores[i] > 0 and not small[i]]
    pool = informative or [i for i in range(len(parts)) if scores[i] > 0] or list(range(len(parts)))
    ranked = sorted(pool, key=lambda i: (-scores[i], i))

    chosen: list[int] = []
    messages: set[int] = set()
    used = 0
    for i in ranked:
        part = parts[i]
        if part.text in (parts[j].text for j in chosen) or any(
            _similar(signatures[i], signatures[j]) for j in chosen
        ):
            continue
        cost = tokens.estimate_tokens(part.text) + 1
        if labelled and part.message not in messages:
            cost += tokens.estimate_tokens(part.speaker) + 1
        if used + cost <= max_tokens:
            chosen.append(i)
            messages.add(part.message)
            used += cost
    while chosen:  # the estimate may be short of the exact count: drop the weakest until it fits
        rendered = _render([parts[i] for i in sorted(chosen)], labelled)
        if _tokens(rendered) <= max_tokens:
            return rendered
        chosen.remove(min(chosen, key=lambda i: (scores[i], -i)))
    best = parts[ranked[0]]
    cut = _cut(_render([best], labelled), max_tokens)
    return cut if len(cut.rstrip("…")) > len(best.speaker) + 1 else _cut(best.text, max_tokens)


def _cut(text: str, max_tokens: int) -> str:
    """The longest prefix of whole words (CJK characters) of ``text`` that fits ``max_tokens`` with "…"."""
    if _tokens(text) <= max_tokens:
        return text
    units = list(_UNIT.finditer(text))
    low, high = 0, len(units)  # the longest fitting prefix has ``low`` units
    while low < high:
        middle = (low + high + 1) // 2
        if _tokens(text[: units[middle - 1].end()] + "…") <= max_tokens:
            low = middle
        else:
            high = middle - 1
    if low:
        return text[: units[low - 1].end()] + "…"
    first = units[0].group(0) if units else text
    for end in range(len(first), 0, -1):  # not one word with "…": as much of the first as fits
        if _tokens(first[:end]) <= max_tokens:
            return first[:end]
    return ""


def keywords(text: str, k: int) -> list[str]:
    """Up to ``k`` most frequent content words, ties broken by first appearance.

    A CJK bigram seen once is mostly noise (half of two words), so it is left out.
    """
    words = _content_words(text)
    first = {w: i for i, w in reversed(list(enumerate(words)))}
    counts = Counter(words)
    kept = [w for w in counts if counts[w] > 1 or not _CJK.search(w)]
    return sorted(kept, key=lambda w: (-counts[w], first[w]))[:k]


def importance(text: str, low: int = 1, high: int = 5) -> int:
    """1–5 from cues: durable-fact and priority words raise it, a very short text lowers it."""
    lowered = text.lower()
    cues = sum(1 for cue in _CUES if cue in lowered)
    score = 2 + (cues >= 1) + (cues >= 3) + any(p in lowered for p in _PERSONAL)
    if size(text) < 30:
        score -= 1
    return max(low, min(high, score))


def slug(text: str, words: int = 3, max_chars: int = 40) -> str:
    """A short technical id: top ASCII-folded keywords joined by ``_`` plus 6 hex of the text's hash."""
    folded = []
    for word in keywords(text, 12):
        ascii_word = unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode()
        ascii_word = re.sub(r"[^a-z0-9]+", "", ascii_word.lower())
        if ascii_word and ascii_word not in folded:
            folded.append(ascii_word)
    stem = "_".join(folded[:words])[:max_chars].rstrip("_") or "memory"
    return f"{stem}_{hashlib.sha256(text.encode()).hexdigest()[:6]}"
