"""The `<environnement_contexte>` block, laid out exactly as seed 000 shows it.

    <environnement_contexte>
    version_framework_echo: "5.173.6"
    modèle_actuel:   "##MODEL_ID##"              # Résolu par le Pipe (ex: MODEL_FLASH)
    ...
    registre_fichiers:
      rapport.pdf:
        id:     "U_abc123_C_xyz789_T_1748246400"
    ...
    </environnement_contexte>

Every value is a YAML double-quoted scalar written by PyYAML's emitter on one line (line breaks,
control and invisible characters escaped), and every `<` is written `\\x3C`: YAML reads the original
text back, while no value can open or close a tag around or inside the block. A filename is a plain
mapping key only when YAML would read it back as that same string, else it is quoted too. Empty
registries are left out; a filename listed twice gets a ` (2)` suffix, so no key is lost. A
filename over 200 characters is cut (ending in `…`): YAML allows keys of 1024 characters at most.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

import yaml

from echo.domain.aec import entries, environment

__all__ = [
    "BLOCK_CLOSE",
    "BLOCK_OPEN",
    "MODEL_ID_PLACEHOLDER",
    "MODEL_ORIGIN_PLACEHOLDER",
    "quoted",
    "render_block",
]

BLOCK_OPEN = "<environnement_contexte>"
BLOCK_CLOSE = "</environnement_contexte>"
MODEL_ID_PLACEHOLDER = "##MODEL_ID##"
"""Replaced by the pipe with the model that answers the turn."""
MODEL_ORIGIN_PLACEHOLDER = "##MODEL_ORIGIN##"
"""Replaced by the pipe with the model that started the turn."""

# The seed aligns the top-level values on the column after `nom_utilisateur: `, and a file's fields
# on the column after `statut: `; longer keys (version_framework_echo, source_id) take one space.
_TOP_WIDTH = len("nom_utilisateur:")
_FILE_WIDTH = len("statut:")
_MODEL_LINES = (
    f'modèle_actuel:   "{MODEL_ID_PLACEHOLDER}"              # Résolu par le Pipe (ex: MODEL_FLASH)',
    f'modèle_origine:  "{MODEL_ORIGIN_PLACEHOLDER}"          # Modèle ayant initié le tour',
)
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\- ]*[A-Za-z0-9_.+\-]|[A-Za-z0-9_]")
_STR_TAG = "tag:yaml.org,2002:str"
_MAX_FILENAME = 200
_MAX_KEY = 1000  # YAML's implicit keys end at 1024 characters, escapes included
_RESOLVER = yaml.resolver.Resolver()


@functools.lru_cache(maxsize=4096)  # PyYAML's emitter takes ~70 µs a value; a turn's values repeat
def quoted(value: str) -> str:
    """`value` as a one-line YAML double-quoted scalar that cannot contain `<`: what replaces a
    placeholder together with its quotes (`'"##MODEL_ID##"'` → `quoted(model)`)."""
    text: str = yaml.safe_dump(value, default_style='"', allow_unicode=True, width=2**31 - 1)
    return text.rstrip("\n").replace("<", "\\x3C")


def _key(name: str) -> str:
    plain = _PLAIN_KEY.fullmatch(name) and _RESOLVER.resolve(yaml.ScalarNode, name, (True, False)) == _STR_TAG
    return name if plain else quoted(name)


def _field(key: str, value: str, width: int) -> str:
    return f"{key + ':':<{width}} {value}"


def _shown_filename(filename: str) -> str:
    shown = filename if len(filename) <= _MAX_FILENAME else filename[: _MAX_FILENAME - 1] + "…"
    while len(_key(shown)) > _MAX_KEY:  # escaped characters take up to 10 each
        shown = shown[: len(shown) // 2] + "…"
    return shown


def _unique_names(files: Sequence[entries.FileEntry]) -> Iterable[tuple[str, entries.FileEntry]]:
    seen: set[str] = set()
    for entry in files:
        base = _shown_filename(entry.filename)
        name, copy = base, 1
        while name in seen:
            copy += 1
            name = f"{base} ({copy})"
        seen.add(name)
        yield name, entry


def _files(files: Sequence[entries.FileEntry]) -> list[str]:
    lines = ["registre_fichiers:"]
    for name, entry in _unique_names(files):
        lines.append(f"  {_key(name)}:")
        lines.append("    " + _field("id", quoted(entry.id), _FILE_WIDTH))
        lines.append("    " + _field("mime", quoted(entry.mime), _FILE_WIDTH))
        lines.append("    " + _field("statut", quoted(entry.statut), _FILE_WIDTH))
        lines.append("    " + _field("source_id", quoted(entry.source_id), _FILE_WIDTH))
    return lines


def _plans(plans: Sequence[entries.PlanEntry]) -> list[str]:
    lines = ["registre_plan:"]
    for plan in plans:
        lines.append(f"  - id: {quoted(plan.id)}")
        lines.append(f"    goal: {quoted(plan.goal)}")
        lines.append(f"    status: {quoted(plan.status)}")
        if plan.modele:
            lines.append(f"    modele: {quoted(plan.modele)}")
    return lines


def _codex(codex: Sequence[entries.CodexEntry]) -> list[str]:
    lines = ["registre_codex:"]
    for entry in codex:
        lines.append(f"  - id: {quoted(entry.id)}")
        lines.append(f"    lang: {quoted(entry.lang)}")
        lines.append(f"    lines: {int(entry.lines)}")
        lines.append(f"    last_commit: {quoted(entry.last_commit)}")
    return lines


def render_block(env: environment.AecEnvironment) -> str:
    """The block for one turn, from `<environnement_contexte>` to its closing tag (no final newline)."""
    lines = [
        BLOCK_OPEN,
        f"version_framework_echo: {quoted(env.framework_version)}",
        *_MODEL_LINES,
        _field("nom_utilisateur", quoted(env.user_name), _TOP_WIDTH),
        _field("date_et_heure", quoted(env.datetime), _TOP_WIDTH),
        _field("localisation", quoted(env.location), _TOP_WIDTH),
        _field("timezone", quoted(env.timezone), _TOP_WIDTH),
    ]
    if env.files:
        lines.extend(_files(env.files))
    if env.plans:
        lines.extend(_plans(env.plans))
    if env.codex:
        lines.extend(_codex(env.codex))
    lines.append(BLOCK_CLOSE)
    return "\n".join(lines)
