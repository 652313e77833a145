"""Where the shared, read-only data lives (`../shared/`), and the constants tests share.

Tests import these from here, not from `conftest`: with a conftest in a sub-folder (tests/kube),
`import conftest` names whichever conftest pytest loaded last.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ADMIN_KEY", "API_KEY", "FIXTURES", "SHARED", "load_fixture"]

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
FIXTURES = SHARED / "fixtures" / "owui-0.12.4"
API_KEY = "test-key-0123456789"
# The memory-management API's own key (ECHO_ADMIN_KEY): the hooks' key cannot list or forget users.
ADMIN_KEY = "test-admin-key-9876543210"


def load_fixture(name: str) -> dict[str, Any]:
    """One captured Open WebUI request body; skips the test when ../shared/ is absent."""
    if not FIXTURES.is_dir():
        pytest.skip(f"Open WebUI fixtures not found at {FIXTURES} (../shared/ is absent)")
    return json.loads((FIXTURES / name).read_text())
