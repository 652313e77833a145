"""Valves of the three filters, with the seeds' names and defaults, pure.

Seed 000 spells its valves in capitals (`WINDOW_SIZE`), seed 002 in snake case
(`keep_last`); each filter keeps its seed's spelling so a valves file reads like the seeds.

Every valve is bounded and takes only its own type: a boolean is `true` or `false` (not `0`, not
`"yes"`), a number is a JSON number or its plain decimal text (`"8"`, `"0.85"`: Open WebUI's valves
editor sends an edited number as text; not `" 8"`, `"8.0"` for an integer, `"1e3"` or `"nan"`), a
model name or default text holds no control character. The rules across valves (`Valves.RULES`) are
what JSON Schema cannot say; the OpenAPI document lists them
(`echo.entrypoints.http.openapi_docs.valves_body`).
"""

from __future__ import annotations

import json
import re
import typing
import zoneinfo
from dataclasses import dataclass
from typing import Annotated, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from echo.config import thresholds

__all__ = [
    "FILTER_VALVES",
    "NUMBER_TEXT",
    "CompressionValves",
    "ContextValves",
    "MemoryValves",
    "Rule",
    "Valves",
    "effective_summary_window",
    "mapping_valve_names",
    "number_kind",
    "parse_json_text",
]

JSON_WHITESPACE = " \t\n\r"
"""What JSON calls whitespace: a mapping valve's text of only these is blank (an empty mapping)."""

SUMMARY_OUTPUT_SHARE = 0.8
"""max_summary_tokens must stay strictly below this share of the summary input window (seed 002)."""


_KNOWN_ZONES: list[JsonValue] = [zone for zone in sorted(zoneinfo.available_timezones() | {"UTC"})]
_ZONES = frozenset(str(zone) for zone in _KNOWN_ZONES)

NUMBER_TEXT: dict[type, str] = {
    int: r"0|-?[1-9][0-9]{0,17}",
    float: r"(?:0|-?[1-9][0-9]{0,17})(?:\.[0-9]{1,15})?",
}
"""The decimal text a number valve takes besides a JSON number (no sign on 0, no exponent, no blank;
at most 15 decimals, so a text within a valve's bounds stays within them as a float)."""

_NUMBER_TEXT = {kind: re.compile(pattern) for kind, pattern in NUMBER_TEXT.items()}

# No control character (C0, DEL, C1) in a name or a text the AEC block or a model call carries.
_PRINTABLE = r"^[^\x00-\x1f\x7f-\x9f]*$"
ModelName = Annotated[str, Field(min_length=1, max_length=200, pattern=_PRINTABLE)]

# Sane ceilings for what has no natural one: bytes, words, tokens, messages.
_MAX_BYTES = 2**31
_MAX_TOKENS = 10**8
_MAX_MESSAGES = 10_000


@dataclass(frozen=True)
class Rule:
    """A rule across valves, which JSON Schema cannot say: `text` in words, `valves` the ones it names
    (a body that breaks it is a 422 whose message names them)."""

    valves: tuple[str, ...]
    text: str


def number_kind(annotation: object) -> type | None:
    """`int` or `float` for a number valve (`bool` is no number here), else None."""
    return annotation if annotation in (int, float) else None


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


class Valves(BaseModel):
    """Base of every filter's valves: unknown names are refused, so a typo is an error.

    Open WebUI's valves editor shows every valve in a text field, so a mapping valve such as
    `model_thresholds` comes back from it as JSON text: it is accepted in that form too.
    """

    model_config = ConfigDict(extra="forbid", validate_default=True)

    RULES: ClassVar[tuple[Rule, ...]] = ()
    """The rules across this filter's valves."""

    @model_validator(mode="before")
    @classmethod
    def _json_text_for_mappings(cls, data: object) -> object:
        if not isinstance(data, dict):
            return data
        parsed = dict(data)
        for name in mapping_valve_names(cls):
            value = parsed.get(name)
            if isinstance(value, str):
                try:
                    parsed[name] = parse_json_text(value)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{name}: not valid JSON text ({error})") from error
        return parsed

    @field_validator("*", mode="before")
    @classmethod
    def _only_its_own_type(cls, value: object, info: ValidationInfo) -> object:
        """What pydantic's lax mode would take and the schema does not is refused: `0` or `"yes"` for a
        boolean, `true` or `" 8"` for a number. A number's plain decimal text is taken (`NUMBER_TEXT`)."""
        field = cls.model_fields[info.field_name or ""]
        if field.annotation is bool:
            if not isinstance(value, bool):
                raise ValueError(f"true or false is required, not {_shown(value)}")
            return value
        kind = number_kind(field.annotation)
        if kind is not None:
            return _number(value, kind)
        if typing.get_origin(field.annotation) is dict:
            return _strict_entries(value, typing.get_args(field.annotation)[-1])
        return value


def _number(value: object, kind: type) -> object:
    if isinstance(value, bool):
        raise ValueError("a number is required, not a boolean")
    if isinstance(value, str):
        if _NUMBER_TEXT[kind].fullmatch(value) is None:
            example = "'8'" if kind is int else "'0.85'"
            raise ValueError(
                f"a number is required (or its plain decimal text, such as {example}), not {_shown(value)}"
            )
        return kind(value)
    return value


def _strict_entries(value: object, entry_model: object) -> object:
    """A mapping valve's entries (`model_thresholds`): a number in an entry is a JSON number."""
    if not isinstance(value, dict) or not (
        isinstance(entry_model, type) and issubclass(entry_model, BaseModel)
    ):
        return value
    for key, entry in value.items():
        if not isinstance(entry, dict):
            continue
        for name, field in entry_model.model_fields.items():
            found = entry.get(name)
            if number_kind(field.annotation) is not None and isinstance(found, bool | str):
                raise ValueError(f"{key}.{name}: a JSON number is required, not {_shown(found)}")
    return value


def mapping_valve_names(model: type[Valves]) -> tuple[str, ...]:
    """The valves of `model` whose value is a mapping (the editor shows and sends them as JSON text)."""
    return tuple(
        name for name, field in model.model_fields.items() if typing.get_origin(field.annotation) is dict
    )


def parse_json_text(text: str) -> object:
    """A mapping valve's JSON text, parsed (blank text is an empty mapping); raises JSONDecodeError."""
    return json.loads(text) if text.strip(JSON_WHITESPACE) else {}


class ContextValves(Valves):
    """`echo_context`: attachments routing, AEC block, outlet secret masking (seed 000, filter 1)."""

    MAX_DIRECT_TEXT_SIZE: int = Field(
        256 * 1024,
        gt=0,
        le=_MAX_BYTES,
        description="Bytes of file text injected directly; larger files go to the ephemeral RAG.",
    )
    ECHO_MR_SUMMARY_MAX_WORDS: int = Field(
        300,
        gt=0,
        le=100_000,
        description="Words of a map-reduce file summary; shorter texts skip map-reduce (fast path).",
    )
    MAX_NATIVE_FILE_SIZE: int = Field(
        20 * 1024 * 1024,
        gt=0,
        le=_MAX_BYTES,
        description="Bytes of an image, audio or video file passed as a native part (Gemini's inline limit"
        " is 20 MB per request); larger media are refused with the reason.",
    )
    MAX_FILE_SIZE: int = Field(
        64 * 1024 * 1024,
        gt=0,
        le=_MAX_BYTES,
        description="Hard limit (bytes) of any file ECHO reads; a larger file is refused and the model told.",
    )
    RAG_CHUNK_TOKENS: int = Field(
        256,
        ge=16,
        le=8192,
        description="Tokens per ephemeral RAG chunk (256 fits MiniLM's window; bge-m3 takes up to 8192).",
    )
    RAG_CHUNK_OVERLAP_TOKENS: int = Field(
        32,
        ge=0,
        le=8191,
        description="Tokens shared by consecutive chunks (a fact cut at a border stays whole); below"
        " RAG_CHUNK_TOKENS.",
    )
    MAP_REDUCE_MODEL: ModelName = Field(
        "gemini-2.5-flash", description="Model of the map-reduce summaries of big files."
    )
    EPHEMERAL_RETENTION_HOURS: float = Field(
        72.0,
        gt=0,
        le=24 * 365,
        description="Hours an ingested file (its registry row and RAG chunks) is kept, then deleted.",
    )
    INLET_DEADLINE_MS: int = Field(
        800, gt=0, le=60000, description="Inlet deadline (ms); past it the body passes unchanged."
    )
    OUTLET_DEADLINE_MS: int = Field(5000, gt=0, le=120000, description="Outlet deadline (ms).")
    ENABLE_AEC: bool = Field(
        True,
        description="Inject the AEC block (<environnement_contexte>: user, date, files, plans, code)"
        " into each turn.",
    )
    AEC_DEFAULT_USER_NAME: str = Field(
        "anonyme",
        min_length=1,
        max_length=200,
        pattern=_PRINTABLE,
        description="nom_utilisateur when Open WebUI sends no user name (the seed's own default).",
    )
    AEC_DEFAULT_LOCATION: str = Field(
        "",
        max_length=200,
        pattern=_PRINTABLE,
        description='localisation when the browser shares none (Open WebUI then sends "Unknown");'
        " empty: unknown.",
    )
    AEC_DEFAULT_TIMEZONE: str = Field(
        "UTC",
        min_length=1,
        description="IANA time zone of date_et_heure when the browser sends none or an unknown one.",
        json_schema_extra={"enum": _KNOWN_ZONES},  # in the schema too: a client can offer the list
    )

    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(("RAG_CHUNK_OVERLAP_TOKENS", "RAG_CHUNK_TOKENS"), "RAG_CHUNK_OVERLAP_TOKENS < RAG_CHUNK_TOKENS"),
    )

    @field_validator("AEC_DEFAULT_TIMEZONE")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if value not in _ZONES:  # exactly a name of the schema's enum: not " UTC" nor "utc"
            raise ValueError(f"{_shown(value)} is not a known IANA time zone (such as UTC or Europe/Paris)")
        return value

    @model_validator(mode="after")
    def _chunks_advance(self) -> ContextValves:
        if self.RAG_CHUNK_OVERLAP_TOKENS >= self.RAG_CHUNK_TOKENS:
            raise ValueError(
                f"RAG_CHUNK_OVERLAP_TOKENS ({self.RAG_CHUNK_OVERLAP_TOKENS}) must be below"
                f" RAG_CHUNK_TOKENS ({self.RAG_CHUNK_TOKENS})"
            )
        return self


class MemoryValves(Valves):
    """`echo_memory`: sliding-window distillation into Qdrant and recall (seed 000, filter 2)."""

    WINDOW_SIZE: int = Field(
        5, ge=1, le=200, description="New messages between two distillations (the stride)."
    )
    WINDOW_OVERLAP: int = Field(
        2,
        ge=0,
        le=199,
        description="Messages shared by consecutive windows (each window has WINDOW_SIZE + WINDOW_OVERLAP"
        " messages); below WINDOW_SIZE.",
    )
    SIMILARITY_THRESHOLD: float = Field(
        0.85, ge=0.0, le=1.0, description="Cosine similarity above which a new memory is merged (LLM merge)."
    )
    EXACT_MATCH_THRESHOLD: float = Field(
        0.95,
        ge=0.0,
        le=1.0,
        description="Cosine similarity above which only the memory's date is touched; at least"
        " SIMILARITY_THRESHOLD.",
    )
    DISTILLATION_MODEL: ModelName = Field("gemini-2.5-flash", description="Model that distils windows.")
    ENABLE_RECALL: bool = Field(True, description="Inject the user's relevant memories on the inlet.")
    RECALL_TOP_K: int = Field(
        40,
        ge=1,
        le=50,
        description="Most memories injected into one turn: a cap above what RECALL_MAX_TOKENS holds, so the"
        " budget and the relevance floor are the limits (about 20 fact-sized memories fit 800 tokens).",
    )
    RECALL_MAX_TOKENS: int = Field(
        800, ge=64, le=32000, description="Token budget of the injected memories block (guard included)."
    )
    RECALL_MIN_SIMILARITY: float = Field(
        0.35,
        ge=0.0,
        le=1.0,
        description="Relevance floor: cosine similarity to the latest user message below which a memory is"
        " neither recalled nor returned by search_memories. Calibrated with the packaged MiniLM on LoCoMo"
        " 26, 30 and 44 (bench/memory.py): 0.35 is about the 5th percentile of the similarity of memories"
        " that hold their question's answer (97% of them kept, answer recall 51.7% against 52.3% with no"
        " floor) while half of the questions of another conversation get nothing; recalibrate for another"
        " embedder (bge-m3 scores higher).",
    )
    INLET_DEADLINE_MS: int = Field(800, gt=0, le=60000, description="Inlet deadline (ms), recall included.")
    OUTLET_DEADLINE_MS: int = Field(5000, gt=0, le=120000, description="Outlet deadline (ms).")

    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            ("EXACT_MATCH_THRESHOLD", "SIMILARITY_THRESHOLD"), "EXACT_MATCH_THRESHOLD >= SIMILARITY_THRESHOLD"
        ),
        Rule(("WINDOW_OVERLAP", "WINDOW_SIZE"), "WINDOW_OVERLAP < WINDOW_SIZE"),
    )

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> MemoryValves:
        if self.EXACT_MATCH_THRESHOLD < self.SIMILARITY_THRESHOLD:
            raise ValueError(
                f"EXACT_MATCH_THRESHOLD ({self.EXACT_MATCH_THRESHOLD}) must be >= "
                f"SIMILARITY_THRESHOLD ({self.SIMILARITY_THRESHOLD})"
            )
        return self

    @model_validator(mode="after")
    def _windows_advance(self) -> MemoryValves:
        if self.WINDOW_OVERLAP >= self.WINDOW_SIZE:
            raise ValueError(
                f"WINDOW_OVERLAP ({self.WINDOW_OVERLAP}) must be below WINDOW_SIZE ({self.WINDOW_SIZE}):"
                " consecutive windows share WINDOW_OVERLAP messages, and each window brings WINDOW_SIZE new"
                " ones"
            )
        return self


class CompressionValves(Valves):
    """`echo_compression`: asynchronous, branch-aware context compression (seed 002 v1.7.2)."""

    priority: int = Field(10, ge=-(2**31), le=2**31 - 1, description="Filter order; lower runs first.")
    compression_threshold_tokens: int = Field(
        64000,
        gt=0,
        le=_MAX_TOKENS,
        description="Context tokens above which a background summary is made; at most max_context_tokens.",
    )
    max_context_tokens: int = Field(
        128000, gt=0, le=_MAX_TOKENS, description="Hard ceiling; above it the oldest groups go."
    )
    keep_first: int = Field(
        1,
        ge=0,
        le=_MAX_MESSAGES,
        description="Non-system messages kept at the head (with system before).",
    )
    keep_last: int = Field(6, ge=0, le=_MAX_MESSAGES, description="Messages always kept at the tail.")
    summary_model: ModelName | Literal[""] | None = Field(
        None, description="Summary model id; empty = the chat's model."
    )
    summary_model_max_context: int = Field(
        0,
        ge=0,
        le=_MAX_TOKENS,
        description="Summary input window (tokens); 0 = model_thresholds, then max_context_tokens.",
    )
    max_summary_tokens: int = Field(
        16384,
        gt=0,
        le=_MAX_TOKENS,
        description="Summary output length (tokens); strictly below 80% of the summary input window.",
    )
    max_summary_share: float = Field(
        0.25,
        gt=0,
        le=1,
        description="ECHO's own valve: the largest share of the tokens of the turns a summary covers that"
        " the summary may take (also bounded by max_summary_tokens). A quarter: a summary must free"
        " most of what it replaces, and keeps the facts of the covered turns at that size.",
    )
    summary_temperature: float = Field(0.1, ge=0.0, le=2.0, description="Summary sampling temperature.")
    summary_fail_mode: Literal["silent", "raise"] = Field(
        "silent", description="silent: log and skip a failed summary; raise: surface the error."
    )
    compression_style: Literal["aggressive", "balanced", "faithful"] = Field(
        "balanced", description="Summary style: fewer tokens, the middle, or more detail."
    )
    model_thresholds: dict[str, thresholds.ModelThreshold] = Field(
        default_factory=lambda: {
            k: thresholds.ModelThreshold(**v) for k, v in thresholds.DEFAULT_MODEL_THRESHOLDS.items()
        },
        description="Per-model compression_threshold_tokens / max_context_tokens (the first at most the"
        " second); custom models inherit their base model's entry.",
    )
    enable_tool_output_trimming: bool = Field(True, description="Trim long native tool outputs.")
    tool_trim_threshold_chars: int = Field(
        600, gt=0, le=_MAX_TOKENS, description="Tool output size that triggers trimming."
    )
    debug_mode: bool = Field(False, description="Verbose server logs.")
    show_debug_log: bool = Field(False, description="Debug logs in the browser console.")
    show_token_usage_status: bool = Field(True, description="Show context usage at the end of a turn.")
    token_usage_status_threshold: int = Field(
        80, ge=0, le=100, description="Usage (%) that shows the status."
    )
    reference_summary_wait_seconds: float = Field(
        10.0,
        ge=0,
        le=120,
        description="ECHO's own valve: how long an inlet waits for the summary of a large referenced chat "
        "(s) before injecting its transcript cut to the budget; the summary, once made, serves later "
        "references. 10 s: a summary model answers within that for most chats, and the user waits a "
        "turn, not a timeout. 0 = never wait. The inlet deadline bounds the wait too.",
    )
    inlet_deadline_ms: int = Field(800, gt=0, le=60000, description="Inlet deadline (ms).")
    outlet_deadline_ms: int = Field(5000, gt=0, le=120000, description="Outlet deadline (ms).")

    RULES: ClassVar[tuple[Rule, ...]] = (
        Rule(
            ("compression_threshold_tokens", "max_context_tokens"),
            "compression_threshold_tokens <= max_context_tokens",
        ),
        Rule(
            ("max_summary_tokens",),
            "max_summary_tokens < 0.8 × the summary input window (summary_model_max_context when above 0,"
            " else model_thresholds[summary_model].max_context_tokens when the summary model has an entry,"
            " else max_context_tokens)",
        ),
        Rule(
            ("model_thresholds", "compression_threshold_tokens", "max_context_tokens"),
            "in each model_thresholds entry, compression_threshold_tokens <= max_context_tokens",
        ),
        Rule(
            ("model_thresholds",), "model_thresholds given as text is the JSON text of its object (blank: {})"
        ),
    )

    @field_validator("summary_model", mode="before")
    @classmethod
    def _empty_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @model_validator(mode="after")
    def _budgets_consistent(self) -> CompressionValves:
        if self.compression_threshold_tokens > self.max_context_tokens:
            raise ValueError(
                f"compression_threshold_tokens ({self.compression_threshold_tokens}) must not exceed "
                f"max_context_tokens ({self.max_context_tokens})"
            )
        window, source = effective_summary_window(self)
        limit = SUMMARY_OUTPUT_SHARE * window
        if not self.max_summary_tokens < limit:
            raise ValueError(
                "max_summary_tokens must be strictly below 80% of the effective summary input window "
                f"(rule: max_summary_tokens < 0.8 × window): max_summary_tokens={self.max_summary_tokens}, "
                f"window={window} from {source}, 80% = {limit:g}. Lower max_summary_tokens or raise the "
                "window; the remaining 20% lets the next compression fit the old summary plus new messages."
            )
        return self


def effective_summary_window(valves: CompressionValves) -> tuple[int, str]:
    """The summary model's input window and where it comes from (seed 002 fallback order)."""
    if valves.summary_model_max_context > 0:
        return valves.summary_model_max_context, "summary_model_max_context"
    entry = thresholds.lookup_threshold(valves.model_thresholds, valves.summary_model)
    if entry is not None:
        return entry.max_context_tokens, f"model_thresholds[{valves.summary_model!r}].max_context_tokens"
    return valves.max_context_tokens, "max_context_tokens"


FILTER_VALVES: dict[str, type[Valves]] = {
    "echo_context": ContextValves,
    "echo_compression": CompressionValves,
    "echo_memory": MemoryValves,
}
"""Filter id -> its valves model."""
