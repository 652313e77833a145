"""Property-based fuzzing of echo-hooks' whole OpenAPI (issue 12, point 1), bounded for `make test`.

The service runs with its backends (PostgreSQL, Qdrant local mode, MiniLM, the offline LLM, the
in-process worker) and the `echo.*` pipe on the fake Gemini; `fakes.api_fuzz.fuzz` sends, per
operation, schema-valid and schema-breaking requests with and without the bearer key, each checked by
every schemathesis check plus `four_xx_names_the_field`. A run must have no failure but the open
findings named in `fakes.api_fuzz.OPEN_FINDINGS`. `make bench` runs the long one (`bench/fuzz.py`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fakes import api_fuzz

pytestmark = pytest.mark.timeout(600)

EXAMPLES_WITH_KEY = 5  # per operation and mode: about half a minute on two cores (bench/fuzz.py runs 100)
EXAMPLES_WITHOUT_KEY = 5  # every protected route answers its documented 401 before reading anything


async def test_the_whole_api_holds_under_fuzzing_with_and_without_the_key(dsn: str, tmp_path: Path) -> None:
    async with api_fuzz.fuzz_service(dsn, tmp_path) as (_, gemini, url):
        keyed = await asyncio.to_thread(api_fuzz.fuzz, url, max_examples=EXAMPLES_WITH_KEY, with_key=True)
        keyless = await asyncio.to_thread(
            api_fuzz.fuzz, url, max_examples=EXAMPLES_WITHOUT_KEY, with_key=False
        )
    assert keyed.operations >= 40, sorted(keyed.examples)  # the pipe, memories, tools, chats, valves, hooks
    assert all(count >= 1 for count in keyed.examples.values())
    assert gemini.requests, "the pipe never reached Gemini"
    assert not keyed.failures, keyed.describe()
    assert not keyless.failures, keyless.describe()
    assert not keyless.open, keyless.describe()  # every protected route answers 401 before anything
