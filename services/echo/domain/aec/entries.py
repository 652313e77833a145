"""What the AEC block lists: the chat's files and the model's own registries (plans, code)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PLAN_STATUSES", "CodexEntry", "FileEntry", "PlanEntry", "count_lines"]

PLAN_STATUSES = ("todo", "in_progress", "blocked", "done", "abandoned")
"""A plan's status, as migration 0011's CHECK constraint spells it."""


@dataclass(frozen=True)
class FileEntry:
    """One file of the chat in `registre_fichiers` (keyed by its filename)."""

    filename: str
    id: str
    mime: str
    statut: str
    source_id: str


@dataclass(frozen=True)
class PlanEntry:
    """One plan in `registre_plan`; `modele` is the model that made it, when it said so."""

    id: str
    goal: str
    status: str
    modele: str | None = None


@dataclass(frozen=True)
class CodexEntry:
    """One code entry in `registre_codex`: its id (a file name), language, size and last commit."""

    id: str
    lang: str
    lines: int
    last_commit: str


def count_lines(content: str) -> int:
    """Lines of a text as an editor counts them: a last line without a newline counts, "" has none."""
    if not content:
        return 0
    return content.count("\n") + (0 if content.endswith("\n") else 1)
