"""Long property-based fuzzing of echo-hooks' whole OpenAPI (issues 12 and 18); `make test` runs a
bounded one (tests/integration/test_api_fuzz.py).

The service as `echoctl serve` runs it, with its backends (PostgreSQL, Qdrant local mode, embeddings
from an HTTP `/embeddings` stub, the offline LLM, the in-process worker) and the `echo.*` pipe on the
fake Gemini.
schemathesis' engine runs over its `/openapi.json` as `schemathesis run --checks all` does: with the
keys, the coverage phase, the fuzzing phase (`--examples` per operation) and the stateful one;
without a key, the coverage phase and `--examples-without-key` in the fuzzing phase. Every response
is checked by every schemathesis check (`max_response_time` at the hooks' deadline and slack) and by
"every 4xx names the field". Prints a table: operations, requests, failures by check, the refusals
by a documented rule across valves (no failures: `fakes.api_fuzz.documented_rule`) apart, and the
first sample of each failure.

    .venv/bin/python bench/fuzz.py [--examples 100] [--examples-without-key 10] [--seed 0|random]

Uses ECHO_DATABASE_URL when set (a throwaway tenant, dropped after), else an embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import stores
from fakes import api_fuzz

from echo.support import logs


def table(runs: list[tuple[str, api_fuzz.FuzzReport]]) -> str:
    rows = [("run", "operations", "requests", "seconds", "check", "failures", "refused by a rule, in")]
    for name, report in runs:
        examples, failures = sum(report.examples.values()), sum(report.failures.values())
        rows.append(
            (name, str(report.operations), str(examples), f"{report.seconds:.0f}", "(all)", str(failures), "")
        )
        for title, count in sorted(report.by_check(report.failures).items()):
            rows.append(("", "", "", "", title, str(count), ""))
        for (operation, rule), count in sorted(report.ruled.items()):
            shown = rule if len(rule) <= 52 else f"{rule[:51]}…"
            rows.append(("", "", "", "", shown, str(count), operation))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in rows
    )


async def main(args: argparse.Namespace) -> int:
    seed = None if args.seed == "random" else int(args.seed)
    logs.configure_logging("ERROR", "console")  # the service's own logs of refused requests stay out
    with tempfile.TemporaryDirectory(prefix="echo-fuzz-") as work:
        async with (
            stores.database(Path(work)) as dsn,
            api_fuzz.fuzz_service(dsn, Path(work)) as (_, _gemini, url),
        ):
            keyed = await asyncio.to_thread(
                api_fuzz.fuzz, url, max_examples=args.examples, with_key=True, seed=seed
            )
            keyless = await asyncio.to_thread(
                api_fuzz.fuzz,
                url,
                max_examples=args.examples_without_key,
                with_key=False,
                phases=("coverage", "fuzzing"),
                seed=seed,
            )
    print(table([("with key", keyed), ("without key", keyless)]))
    for name, report in (("with key", keyed), ("without key", keyless)):
        if report.failures or report.ruled:
            print(f"\n{name}, first sample of each failure:\n{report.describe()}")
    return 1 if keyed.failures or keyless.failures or keyless.ruled else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100, help="per operation and mode, with the key")
    parser.add_argument("--examples-without-key", type=int, default=10)
    parser.add_argument("--seed", default="0", help="an integer (reproducible) or random")
    sys.exit(asyncio.run(main(parser.parse_args())))
