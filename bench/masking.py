"""Recall and false positives of secret masking (echo.domain.masking) on the masking corpus, and its cost.

The corpus (``bench/masking_corpus/corpus.py``): synthetic secrets of every kind, written every way
issue 18 found leaking, and negatives (the LoCoMo dialogues when ``../shared`` is there, the
repository's code and docs, hashes, UUIDs, base64 images, random base64 and hex, near misses).

A positive counts as masked when the masked text holds no fragment of its secret, read through the
masking view (zero-width characters dropped, fullwidth folded, escapes and base64 decoded), and its
kind was counted; it is also streamed (``StreamMasker``, random chunks) and must give the same text.
A negative is a false positive when masking changes it at all. Goal: 100% recall, no false positive.
Then the cost on clean text: ``mask_secrets`` on 100 KB of dialogue, and an outlet body of 100 KB.

    .venv/bin/python bench/masking.py [--repeats 20] [--compare path/to/other/masking.py]

``--compare`` times another implementation of ``echo.domain.masking`` on the same clean texts (before/after).
Exits 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import importlib.util
import random
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent / "masking_corpus"))

from corpus import Negative, Positive, negatives, positives

from echo.capabilities.masking import filter as masking_filter
from echo.domain import masking

_B64_RUN = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}")


def readings(text: str) -> list[str]:
    """``text`` as a reader could decode it: itself, its masking view, and its base64 runs decoded."""
    view = masking._view(text).text
    out = [text, view]
    for source in (text, view, re.sub(r"\s+", "", text)):
        for run in _B64_RUN.findall(source):
            data = run[: len(run) - len(run) % 4] if "=" not in run else run
            try:
                out.append(base64.b64decode(data, validate=False).decode("latin-1"))
            except (binascii.Error, ValueError):
                continue
    return out


def leaked(positive: Positive, masked: str) -> bool:
    texts = readings(masked)
    return any(fragment in text for fragment in positive.fragments() for text in texts)


def streamed(text: str, rng: random.Random) -> str:
    masker, out, at = masking.StreamMasker(), [], 0
    while at < len(text):
        size = rng.choice((1, 2, 3, 7, 16, 64, 500))
        out.append(masker.feed(text[at : at + size]))
        at += size
    out.append(masker.flush())
    return "".join(out)


def check_positive(positive: Positive, rng: random.Random) -> tuple[bool, bool]:
    """(masked, streamed like the whole text)."""
    result = masking.mask_secrets(positive.text)
    ok = result.counts.get(positive.kind, 0) > 0 and not leaked(positive, result.text)
    return ok, streamed(positive.text, rng) == result.text


def table(title: str, header: tuple[str, ...], rows: Iterable[tuple[Any, ...]]) -> None:
    rows = list(rows)
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows, strict=True)]
    print(f"\n{title}")
    print(
        "  ".join(
            str(h).ljust(w) if i == 0 else str(h).rjust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    )
    for row in rows:
        print(
            "  ".join(
                str(x).ljust(w) if i == 0 else str(x).rjust(w)
                for i, (x, w) in enumerate(zip(row, widths, strict=True))
            )
        )


def recall_rows(groups: dict[str, list[bool]]) -> list[tuple[str, int, int, str]]:
    rows = [(name, len(oks), sum(oks), f"{100 * sum(oks) / len(oks):.1f}%") for name, oks in groups.items()]
    total = [ok for oks in groups.values() for ok in oks]
    return [*rows, ("all", len(total), sum(total), f"{100 * sum(total) / len(total):.1f}%")]


def clean_texts(found: list[Negative]) -> dict[str, str]:
    """About 100 KB of each kind of clean text the outlet sees."""
    dialogue = "\n".join(n.text for n in found if n.source == "LoCoMo dialogue")
    if len(dialogue) < 100_000:  # no ../shared: the repository's docs and near misses instead
        dialogue = "\n".join(n.text for n in found if n.source in ("repository docs", "near misses"))
    code = "\n".join(n.text for n in found if n.source == "repository code")
    french = "Bonjour ! Voici une réponse en français : la clé se règle dans l’onglet « Sécurité ». "
    emoji = "Great news 🎉 the family 👨‍👩‍👧 is here — see you at 5 pm! "
    return {
        "dialogue": (dialogue * (1 + 100_000 // max(1, len(dialogue))))[:100_000],
        "code": (code * 2)[:100_000],
        "French": (french * 2000)[:100_000],
        "emoji": (emoji * 3000)[:100_000],
    }


def best_ms(call: Callable[[], object], repeats: int) -> float:
    """The best CPU time of ``repeats`` calls (CPU time: other processes on the machine count less)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        call()
        best = min(best, time.process_time() - started)
    return best * 1000


def outlet_body(text: str, messages: int = 50) -> dict[str, Any]:
    size = len(text) // messages
    body: list[dict[str, Any]] = []
    for i in range(messages):
        answer = text[i * size : (i + 1) * size]
        body.append({"id": f"u{i}", "role": "user", "content": f"question {i}"})
        output = [{"type": "message", "id": f"m{i}", "content": [{"type": "output_text", "text": answer}]}]
        body.append({"id": f"a{i}", "role": "assistant", "content": answer, "output": output})
    return {"chat_id": "c", "id": f"a{messages - 1}", "messages": body}


def load_module(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("masking_compared", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--compare", help="another masking.py to time on the same clean texts")
    args = parser.parse_args()
    rng = random.Random(7)

    found = positives()
    by_kind: dict[str, list[bool]] = defaultdict(list)
    by_variant: dict[str, list[bool]] = defaultdict(list)
    stream_diffs, misses = 0, []
    for positive in found:
        ok, same = check_positive(positive, rng)
        by_kind[positive.kind].append(ok)
        by_variant[positive.variant].append(ok)
        stream_diffs += not same
        if not ok:
            misses.append(positive)
    table("Positives per kind", ("kind", "texts", "masked", "recall"), recall_rows(by_kind))
    table("Positives per way of writing", ("written", "texts", "masked", "recall"), recall_rows(by_variant))
    for miss in misses[:10]:
        print(f"  MISSED {miss.kind} / {miss.variant}: {miss.text[:100]!r}")
    print(f"\nstreamed (random chunks) unlike the whole text: {stream_diffs} of {len(found)}")

    clean = negatives()
    per_source: dict[str, list[Negative]] = defaultdict(list)
    false: Counter[str] = Counter()
    for negative in clean:
        per_source[negative.source].append(negative)
        result = masking.mask_secrets(negative.text)
        if result.text != negative.text:
            false[negative.source] += 1
            print(f"  FALSE POSITIVE {negative.source} / {negative.name}: {dict(result.counts)}")
    rows = [
        (source, len(items), sum(len(n.text) for n in items), false[source])
        for source, items in per_source.items()
    ]
    rows.append(("all", len(clean), sum(len(n.text) for n in clean), sum(false.values())))
    table("Negatives", ("source", "texts", "characters", "false positives"), rows)
    if not any(n.source == "LoCoMo dialogue" for n in clean):
        print("  (no ../shared/data/locomo: the LoCoMo dialogues were not read)")

    implementations: list[tuple[str, ModuleType]] = [("this tree", masking)]
    if args.compare:
        implementations.insert(0, (Path(args.compare).name, load_module(args.compare)))
    rows = []
    for name, text in clean_texts(clean).items():
        row: list[Any] = [f"{name} ({len(text) // 1000} KB)"]
        for _, module in implementations:
            row.append(f"{best_ms(lambda m=module, t=text: m.mask_secrets(t), args.repeats):.2f}")
        rows.append(tuple(row))
    body = outlet_body(clean_texts(clean)["dialogue"])
    rows.append(
        (
            "outlet body, 50 answers (100 KB)",
            *(["-"] * (len(implementations) - 1)),
            f"{best_ms(lambda: masking_filter.mask_outlet_body(body), args.repeats):.2f}",
        )
    )
    header = ("clean text", *(f"{name} ms" for name, _ in implementations))
    table(f"Cost on clean text (best of {args.repeats})", header, rows)

    recall_ok = not misses and stream_diffs == 0
    return 0 if recall_ok and not false else 1


if __name__ == "__main__":
    sys.exit(main())
