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
near-identical sentences are kept once. A decision, plan or commitment ("decided", "I'll", "going
to", "signed up"…) raises a sentence too: with names, numbers and dates these are what a later
question asks about. ``style`` (``compression_style``) changes what is kept: ``aggressive`` only
the sentences that carry a fact (a name, a number, a date or a decision) when there are any;
``balanced`` the best sentences; ``faithful`` whole messages, best first, so exchanges read as they
were said, and the room left to single sentences. Sentences are taken best first while they fit the budget,
which is counted in o200k_base tokens, labels, spaces and line breaks included: the estimate while
choosing, then the exact count of the result, dropping the weakest sentence until it fits.
``size`` counts words, each CJK character counting as one (about a token each).
"""

from __future__ import annotations

import hashlib
import heapq
import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from echo.domain import tokens

__all__ = ["STYLES", "importance", "keywords", "sentences", "size", "slug", "summarize"]

STYLES = ("aggressive", "balanced", "faithful")

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
_DECISION = re.compile(
    r"\b(?:decid\w*|decision|chose|chosen|choos\w*|agreed|plan(?:s|ned|ning)?|going to|gonna|will|"
    r"i'll|we'll|signed up|sign up|start(?:ed|ing)? (?:to|a|my)|booked|bought|adopt\w*|join\w*|"
    r"promis\w*|commit\w*|décid\w*|vais|allons|prévu)\b",
    re.IGNORECASE,
)  # decisions, plans and commitments: what a later question asks about
_DECISION_BOOST = 1.2
_SAID = 0.25  # weight left to a word a chosen sentence already says
_LENGTH_POWER = 0.8  # a sentence scores its words over its length to this power
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


@dataclass(frozen=True)
class _Scores:
    """Per sentence: informativeness, small talk or not, content words, and whether it carries a fact."""

    score: list[float]
    small: list[bool]
    signatures: list[frozenset[str]]
    factual: list[bool]
    factor: list[float]  # score = factor × the sum of its distinct words' weights
    weight: dict[str, float]


def _score(parts: list[_Sentence]) -> _Scores:
    """Informativeness of each sentence, whether it is small talk, its content words, and whether it
    carries a fact (a name, a number, a date, a decision).

    A content word weighs its inverse sentence frequency (rare, specific words count most), slightly
    raised by how often it recurs; a sentence scores the sum over its distinct content words divided
    by the square root of its length, raised by numbers and dates, by proper nouns and by a decision."""
    words = [[w for w in _content_words(p.text) if w not in _SMALL_TALK] for p in parts]
    n = len(parts)
    frequency = Counter(w for ws in words for w in ws)
    spread = Counter(w for ws in words for w in set(ws))
    weight = {w: math.log((n + 1) / spread[w]) * (1.0 + 0.25 * math.log(frequency[w])) for w in frequency}
    common = {w for w in spread if n >= _COMMON_MIN_SENTENCES and spread[w] > _COMMON_SHARE * n}
    scores: list[float] = []
    small: list[bool] = []
    factual: list[bool] = []
    factors: list[float] = []
    for part, ws in zip(parts, words, strict=True):
        distinct = frozenset(ws)
        has_number = bool(_DIGIT.search(part.text))
        dated = has_number or bool(_DATE_WORDS.intersection(w.lower() for w in _WORD.findall(part.text)))
        names = {m.group(1) for m in _PROPER.finditer(part.text) if m.group(1).lower() not in _STOPWORDS}
        decided = bool(_DECISION.search(part.text))
        factor = 1 / max(len(ws), _MIN_SCORED_WORDS) ** _LENGTH_POWER
        factor *= (1.25 if dated else 1.0) * (1.0 + 0.1 * min(len(names), 3))
        factor *= _DECISION_BOOST if decided else 1.0
        factors.append(factor)
        scores.append(factor * sum(weight[w] for w in distinct))
        plain = _SMALL_TALK_PHRASES.sub(" ", part.text.lower())  # "no problem" says nothing of a problem
        substantive = {w for w in _content_words(plain) if w not in _SMALL_TALK} - common
        small.append(_is_small_talk(plain, len(substantive), has_number))
        factual.append(bool(distinct) and (dated or bool(names) or decided))
    return _Scores(scores, small, [frozenset(ws) for ws in words], factual, factors, weight)


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


def summarize(text: str, max_tokens: int, style: str = "balanced") -> str:
    """The most informative sentences of ``text``, in their order with who said them, within
    ``max_tokens`` o200k_base tokens (speaker labels, spaces and line breaks included); ``style``
    (one of ``STYLES``) as the module docstring says.

    Small talk is left out while informative sentences remain, near-identical sentences are kept
    once, and when not even the best sentence fits it is cut, with "…"."""
    if style not in STYLES:
        raise ValueError(f"style: expected one of {STYLES}, got {style!r}")
    parts = _parse(text)
    labelled = any(p.speaker for p in parts)
    whole = _render(parts, labelled)
    if max_tokens < 1 or not parts:
        return "" if max_tokens < 1 else whole
    if tokens.estimate_tokens(whole) <= 2 * max_tokens and _tokens(whole) <= max_tokens:
        return whole
    scored = _score(parts)
    scores = scored.score
    informative = [i for i in range(len(parts)) if scores[i] > 0 and not scored.small[i]]
    pool = informative or [i for i in range(len(parts)) if scores[i] > 0] or list(range(len(parts)))
    if style == "aggressive":
        pool = [i for i in pool if scored.factual[i]] or pool
    ranked = sorted(pool, key=lambda i: (-scores[i], i))
    picker = _Picker(parts, scored, labelled, max_tokens)
    if style == "faithful":
        picker.whole_messages(ranked)
    picker.cover(pool)
    chosen = picker.chosen
    while chosen:  # the estimate may be short of the exact count: drop the weakest until it fits
        rendered = _render([parts[i] for i in sorted(chosen)], labelled)
        if _tokens(rendered) <= max_tokens:
            return rendered
        chosen.remove(min(chosen, key=lambda i: (scores[i], -i)))
    best = parts[ranked[0]]
    cut = _cut(_render([best], labelled), max_tokens)
    return cut if len(cut.rstrip("…")) > len(best.speaker) + 1 else _cut(best.text, max_tokens)


class _Picker:
    """The sentences chosen so far within the budget (estimated tokens, labels included)."""

    def __init__(self, parts: list[_Sentence], scored: _Scores, labelled: bool, max_tokens: int) -> None:
        self.parts, self.scored, self.labelled, self.max_tokens = parts, scored, labelled, max_tokens
        self.chosen: list[int] = []
        self.messages: set[int] = set()
        self.used = 0

    def _repeats(self, i: int) -> bool:
        signatures = self.scored.signatures
        return self.parts[i].text in (self.parts[j].text for j in self.chosen) or any(
            _similar(signatures[i], signatures[j]) for j in self.chosen
        )

    def _cost(self, indices: list[int]) -> int:
        cost = sum(tokens.estimate_tokens(self.parts[i].text) + 1 for i in indices)
        message = self.parts[indices[0]].message
        if self.labelled and message not in self.messages:
            cost += tokens.estimate_tokens(self.parts[indices[0]].speaker) + 1
        return cost

    def take(self, i: int) -> bool:
        """Sentence ``i`` when it is new and fits; whether it was taken."""
        if i in self.chosen or self._repeats(i):
            return False
        cost = self._cost([i])
        if self.used + cost > self.max_tokens:
            return False
        self.chosen.append(i)
        self.messages.add(self.parts[i].message)
        self.used += cost
        return True

    def cover(self, pool: list[int]) -> None:
        """Sentences of ``pool`` taken greedily by what they add: a word already said by a chosen
        sentence weighs ``_SAID`` of its weight, so the summary spends its tokens on more distinct
        facts rather than the same ones again (scores only fall, so a lazy heap is exact)."""
        scored, said = self.scored, set().union(*(self.scored.signatures[j] for j in self.chosen))

        def gain(i: int) -> float:
            weights = scored.weight
            total = sum(weights[w] * (_SAID if w in said else 1.0) for w in scored.signatures[i])
            return scored.factor[i] * total

        heap = [(-gain(i), i) for i in pool if i not in self.chosen]
        heapq.heapify(heap)
        while heap:
            _, i = heapq.heappop(heap)
            current = gain(i)
            if heap and current < -heap[0][0]:
                heapq.heappush(heap, (-current, i))  # stale: its words were said meanwhile
                continue
            if self.take(i):
                said |= scored.signatures[i]

    def whole_messages(self, ranked: list[int]) -> None:
        """The messages of the ``ranked`` sentences, best first, each whole (its sentences that are
        not small talk nor repeats) when it fits."""
        members: dict[int, list[int]] = {}
        for i, part in enumerate(self.parts):
            if not self.scored.small[i]:
                members.setdefault(part.message, []).append(i)
        seen: set[int] = set()
        for i in ranked:
            message = self.parts[i].message
            if message in seen:
                continue
            seen.add(message)
            fresh = [j for j in members.get(message, [i]) if j not in self.chosen and not self._repeats(j)]
            if not fresh:
                continue
            cost = self._cost(fresh)
            if self.used + cost <= self.max_tokens:
                self.chosen.extend(fresh)
                self.messages.add(message)
                self.used += cost


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
