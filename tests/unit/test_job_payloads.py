"""The declared payload of each job kind: rows as earlier releases stored them read back and written
again key for key, the old tolerances kept, the version rule, and errors that name the field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

from echo.capabilities.compression import payloads as compression_payloads
from echo.capabilities.context import payloads as context_payloads
from echo.capabilities.memory import payloads as memory_payloads
from echo.domain import chain
from echo.queue import errors, payloads

H = "a" * 64  # a hash-shaped string

# Rows as the hand-written codecs of the previous release stored them (their `to_payload`).
SUMMARY_V1: dict[str, Any] = {
    "v": 1,
    "user_id": "u1",
    "chat_id": "c1",
    "head_count": 1,
    "start": 1,
    "parent": H,
    "invariants": [H, H],
    "covered_hash": H,
    "previous": None,
    "model": "gemini-2.5-flash",
    "window": {"input_tokens": 4000, "output_tokens": 500, "source": "model_thresholds['gpt-4']"},
    "style": "faithful",
    "max_share": 0.3,
    "temperature": 0.3,
    "fail_mode": "raise",
    "locale": "fr-FR",
}
DISTILL_V1: dict[str, Any] = {
    "v": 1,
    "user_id": "u1",
    "chat_id": "c1",
    "window": H,
    "start": 4,
    "parent": H,
    "invariants": [H],
    "message_ids": ["m4", None],
    "file_names": {"f1": "notes.txt"},
    "model": "gemini-2.5-flash",
    "similarity_threshold": 0.85,
    "exact_match_threshold": 0.95,
}
MAP_REDUCE_STORED: dict[str, Any] = {  # no "v": map_reduce rows had none
    "user_id": "u1",
    "chat_id": "c1",
    "source_id": "U_u1_C_c1_T_1",
    "file_id": "f1",
    "filename": "report.pdf",
    "mime_type": "application/pdf",
    "max_words": 300,
    "chunk_tokens": 256,
    "overlap_tokens": 32,
    "max_file_bytes": 67108864,
    "model": "gemini-2.5-flash",
}


@pytest.mark.parametrize(
    ("model", "row"),
    [
        (compression_payloads.SummaryPayload, SUMMARY_V1),
        (memory_payloads.DistillPayload, DISTILL_V1),
        (context_payloads.MapReducePayload, MAP_REDUCE_STORED),
    ],
    ids=["summary", "distill", "map_reduce"],
)
def test_a_stored_row_reads_back_and_writes_the_same_keys_and_values(
    model: type[payloads.Payload], row: dict[str, Any]
) -> None:
    decoded = model.decode(row)
    assert decoded.to_payload() == {"v": 1, **row}
    assert model.decode(decoded.to_payload()) == decoded
    assert model.decode({**row, "added_by_a_newer_release": [1]}) == decoded  # unknown keys ignored
    assert model.decode({k: v for k, v in row.items() if k != "v"}) == decoded  # no "v": version 1
    with pytest.raises(
        errors.PermanentJobError, match=f"malformed {model.KIND} payload: v: .*version 1, not 2"
    ):
        model.decode({**row, "v": 2})
    with pytest.raises(errors.PermanentJobError, match="a JSON object, not list"):
        model.decode([row])  # type: ignore[arg-type]


def test_the_summary_payload_keeps_the_old_defaults_and_names_the_field() -> None:
    old = {**SUMMARY_V1, "model": None, "locale": "", "window": {"input_tokens": 4000, "output_tokens": 500}}
    for key in ("style", "temperature", "fail_mode", "chat_id", "previous"):
        del old[key]
    decoded = compression_payloads.SummaryPayload.decode(old)
    assert (decoded.model, decoded.locale, decoded.window.source) == ("", "en-US", "")
    assert (decoded.style, decoded.temperature, decoded.fail_mode) == ("balanced", 0.1, "silent")
    with pytest.raises(errors.PermanentJobError) as caught:
        compression_payloads.SummaryPayload.decode({**SUMMARY_V1, "window": {"input_tokens": "many"}})
    assert str(caught.value) == (
        "malformed summary payload: window.input_tokens: Input should be a valid integer, unable to parse"
        " string as an integer; window.output_tokens: Field required"
    )
    with pytest.raises(errors.PermanentJobError, match=r"head_count: 2 must lie in 0\.\.start"):
        compression_payloads.SummaryPayload.decode({**SUMMARY_V1, "head_count": 2})


def test_the_distill_payload_keeps_the_old_tolerances() -> None:
    decoded = memory_payloads.DistillPayload.decode(
        {**DISTILL_V1, "chat_id": "", "message_ids": [3, "m5"], "file_names": None, "model": ""}
    )
    assert decoded.chat_id is None
    assert decoded.message_ids == (None, "m5")
    assert decoded.file_names == {}
    assert decoded.model == "gemini-2.5-flash"
    assert memory_payloads.DistillPayload.decode({**DISTILL_V1, "file_names": {"f": 7}}).file_names == {
        "f": "7"
    }
    assert decoded.window.key == decoded.key == H


def test_the_distill_chain_is_checked_by_the_handler_not_the_model() -> None:
    first = chain.cumulative_hash(H, None)
    good = memory_payloads.DistillPayload.decode({**DISTILL_V1, "parent": None, "window": first})
    good.check_chain()
    broken = memory_payloads.DistillPayload.decode(DISTILL_V1)  # decodes: its shape is right
    with pytest.raises(errors.PermanentJobError, match="the invariants do not lead to window"):
        broken.check_chain()


def test_the_map_reduce_payload_refuses_an_overlap_as_large_as_the_chunk() -> None:
    with pytest.raises(errors.PermanentJobError, match="overlap_tokens: 256 must be below chunk_tokens"):
        context_payloads.MapReducePayload.decode({**MAP_REDUCE_STORED, "overlap_tokens": 256})
    with pytest.raises(errors.PermanentJobError, match="source_id: String should have at least 1 character"):
        context_payloads.MapReducePayload.decode({**MAP_REDUCE_STORED, "source_id": ""})


class Renamed(payloads.Payload):
    """A kind whose version 2 renamed `name` to `title`."""

    KIND: ClassVar[str] = "renamed"
    VERSION: ClassVar[int] = 2

    title: str

    @classmethod
    def upgrade(cls, stored: Mapping[str, Any], version: object) -> Mapping[str, Any]:
        if version == 1:
            return {"title": stored["name"]}
        return super().upgrade(stored, version)


def test_a_new_version_upgrades_the_rows_of_older_ones_and_refuses_newer_ones() -> None:
    assert Renamed.decode({"name": "old row"}) == Renamed(title="old row")
    assert Renamed.decode({"v": 2, "title": "new row"}).to_payload() == {"v": 2, "title": "new row"}
    with pytest.raises(errors.PermanentJobError, match="v: this worker reads version 2, not 3"):
        Renamed.decode({"v": 3, "title": "from the future"})
