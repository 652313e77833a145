"""Where the test data lives (`tests/fixtures/`, in the repository), and the constants tests share.

Tests import these from here, not from `conftest`: with a conftest in a sub-folder (tests/kube),
`import conftest` names whichever conftest pytest loaded last.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["ADMIN_KEY", "API_KEY", "FIXTURES", "LOCOMO", "SEEDS", "TEST_DATA", "load_fixture"]

# Copies of what tests need from ../shared/ (see tests/fixtures/README.md), so a clean clone runs them all.
TEST_DATA = Path(__file__).resolve().parents[1] / "fixtures"
FIXTURES = TEST_DATA / "owui-0.12.4"  # what Open WebUI 0.12.4 really sent
LOCOMO = TEST_DATA / "locomo"  # one LoCoMo conversation, whole
SEEDS = TEST_DATA / "seeds"
API_KEY = "test-key-0123456789"
# The memory-management API's own key (ECHO_ADMIN_KEY): the hooks' key cannot list or forget users.
ADMIN_KEY = "test-admin-key-9876543210"


def load_fixture(name: str) -> dict[str, Any]:
    """One captured Open WebUI request (`path`, `headers`, `body`) from tests/fixtures/owui-0.12.4/."""
    return json.loads((FIXTURES / name).read_text())
