"""Property-based fuzzing of echo-hooks' whole OpenAPI (issues 12 and 18), bounded for `make test`.

The service runs with its backends (PostgreSQL, Qdrant local mode, an HTTP embedding stub, the offline
LLM, the in-process worker) and the `echo.*` pipe on the fake Gemini; `fakes.api_fuzz.fuzz` runs
schemathesis' engine over it as `schemathesis run --checks all` does: with the keys, its coverage phase
(every boundary and wrong type of each schema, the methods a path does not document: a 405 with the
right `Allow`), the fuzzing phase and the stateful one; without a key, the fuzzing phase. Every response
goes through every schemathesis check plus `four_xx_names_the_field`. A run has no failure and no open
finding: the one schema-valid body that may be refused is a valves body breaking a rule across valves
that its schema lists (`x-echo-rules`), with a 422 naming that rule's valves (counted apart). `make
bench` runs the long one (`bench/fuzz.py`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fakes import api_fuzz

# Not measured for coverage (pytest-cov's `no_cover`): traced, its thousands of requests took three to
# seven times as long (3 to 8 minutes, the whole suite's critical path), for lines the other tests cover.
pytestmark = [pytest.mark.timeout(600), pytest.mark.no_cover]

EXAMPLES_WITH_KEY = 5  # per operation in the fuzzing phase (bench/fuzz.py runs 100); coverage: all it derives
EXAMPLES_WITHOUT_KEY = 5  # every protected route answers its documented 401 before reading anything


async def test_the_whole_api_holds_under_fuzzing_with_and_without_the_key(dsn: str, tmp_path: Path) -> None:
    async with api_fuzz.fuzz_service(dsn, tmp_path) as (_, gemini, url):
        keyed = await asyncio.to_thread(api_fuzz.fuzz, url, max_examples=EXAMPLES_WITH_KEY, with_key=True)
        keyless = await asyncio.to_thread(
            api_fuzz.fuzz, url, max_examples=EXAMPLES_WITHOUT_KEY, with_key=False, phases=("fuzzing",)
        )
    assert keyed.operations >= 40, sorted(keyed.examples)  # the pipe, memories, tools, chats, valves, hooks
    assert all(count >= 1 for count in keyed.examples.values())
    assert keyed.phases["coverage"] > 1000, keyed.phases
    assert keyed.phases["fuzzing"] >= keyed.operations, keyed.phases
    assert gemini.requests, "the pipe never reached Gemini"
    assert not keyed.failures, keyed.describe()
    assert not keyless.failures, keyless.describe()
    assert not keyless.ruled, keyless.describe()  # every protected route answers 401 before anything
