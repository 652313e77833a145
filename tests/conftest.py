"""Shared fixtures: settings on a temporary data dir, the real app served over HTTP, fixtures on disk,
migrated tenant schemas (reused across the run), and a one-certificate trust store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import structlog
from fakes import trust_store
from fakes.live_server import LiveServer
from fakes.shared_data import ADMIN_KEY, API_KEY

from echo.adapters.store import testing as store_testing
from echo.adapters.store.pool import Store
from echo.config.settings import Settings
from echo.entrypoints.http import create_app
from echo.queue.queue import JobQueue

trust_store.use_one_certificate()  # before any client is made: see fakes/trust_store.py


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "echo", api_key=API_KEY, admin_key=ADMIN_KEY, config_reload_seconds=0.05
    )


@pytest.fixture
def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
def admin() -> dict[str, str]:
    """The memory-management API's credential (`ECHO_ADMIN_KEY`), to pass as `headers=` per request."""
    return {"Authorization": f"Bearer {ADMIN_KEY}"}


@pytest.fixture
def hooks_server(settings: Settings) -> Iterator[LiveServer]:
    with LiveServer(create_app(settings), name="echo-hooks") as server:
        yield server


@pytest.fixture
def client(hooks_server: LiveServer, auth: dict[str, str]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=hooks_server.url, headers=auth, timeout=10) as http:
        yield http


@pytest.fixture
async def dsn() -> str:
    """The test PostgreSQL (ECHO_TEST_DATABASE_URL, default 127.0.0.1:5432/test); skips when unreachable."""
    url = store_testing.test_dsn()
    reason = await store_testing.unreachable(url)
    if reason:
        pytest.skip(f"PostgreSQL at {url} is unreachable: {reason}")
    return url


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[Store]:
    """A migrated tenant schema of its own on the test PostgreSQL, empty: one of the run's reusable
    schemas (migrated once, emptied when the test ends; `echo.adapters.store.testing`)."""
    async with store_testing.temporary_store(dsn, max_size=12) as store:
        yield store


@pytest.fixture(scope="session", autouse=True)
def _reusable_schemas_dropped() -> Iterator[None]:
    """The reusable tenant schemas this run (this xdist worker) made go when it ends."""
    yield
    asyncio.run(store_testing.drop_reusable())


@pytest.fixture
def jobs(store: Store) -> JobQueue:
    return JobQueue(store)


# The tests that load the packaged MiniLM model: importing sentence-transformers and torch and loading
# the model costs a process 15 to 25 s of CPU, so under xdist (`make test`: `--dist loadgroup`) they
# share one worker instead of each worker paying it. One missing here still passes, wherever it runs.
_MINILM = (
    "tests/contract/test_embedders.py::TestLocalEmbedder",
    "tests/integration/test_context_flow.py",
    "tests/integration/test_dashboards_live.py",
    "tests/integration/test_embeddings_local.py",
    "tests/integration/test_identity_flow.py",
    "tests/integration/test_memory_flow.py",
    "tests/integration/test_memory_llm.py",
    "tests/integration/test_unstorable_text.py",
)


# Modules whose module-scoped fixtures or per-process caches are dear (the Infinity server, helm's
# renders, promtool, the fake servers): each runs on one worker, which builds them once, instead of
# `--dist loadgroup` spreading its tests over every worker and each building its own.
_ONE_WORKER = (
    "tests/contract/test_infinity.py",
    "tests/integration/test_chart.py",
    "tests/integration/test_dashboards.py",
    "tests/integration/test_embeddings_http.py",
    "tests/integration/test_llm_openai.py",
)


# tryfirst: xdist's worker names each item's group (its `@group` nodeid suffix) in its own
# collection_modifyitems, registered after this conftest and so called before it unless this goes first.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.nodeid.startswith(_MINILM):
            item.add_marker(pytest.mark.xdist_group("minilm"))
        elif item.nodeid.startswith(_ONE_WORKER):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def pytest_make_parametrize_id(config: pytest.Config, val: object, argname: str) -> str | None:
    """Bytes parameters (PDFs made per process, with their own dates and ids) are named by their
    argument, not their content: every xdist worker must collect the same ids."""
    return argname if isinstance(val, bytes) and len(val) > 16 else None


class _GroupsChecked:
    """After xdist's worker has named the groups: a grouped test whose node id lacks its ``@group``
    suffix would run anywhere (each worker paying the dear set-up again), so the run stops instead."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if not getattr(config.option, "loadgroup", False):
            return
        grouped = [item.nodeid for item in items if item.get_closest_marker("xdist_group")]
        lost = [nodeid for nodeid in grouped if "@" not in nodeid]
        if lost:
            raise pytest.UsageError(f"--dist loadgroup did not group {len(lost)} tests, e.g. {lost[0]}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_GroupsChecked(), "echo-xdist-groups-checked")


@pytest.fixture(autouse=True)
def _structlog_restored() -> Iterator[None]:
    """A CLI run in a test configures structlog for the process (level included); undo it afterwards,
    so a later test's `capture_logs` sees every level."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
