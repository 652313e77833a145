"""docs/http-api.md is what `scripts/http_reference.py` writes from the app's `/openapi.json` today."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("http_reference", ROOT / "scripts" / "http_reference.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_http_route_reference_is_current() -> None:
    reference = generator()
    document = reference.openapi()
    written = (ROOT / "docs" / "http-api.md").read_text(encoding="utf-8")
    assert written == reference.render(document), (
        "run `.venv/bin/python scripts/http_reference.py docs/http-api.md`"
    )
    for path, operations in document["paths"].items():  # every route has its section
        for method in operations:
            assert f"## `{method.upper()} {path}`" in written or path.startswith("/v1/"), (method, path)
