"""The suite's fixtures and seed header, from tests/fixtures/harness.py
(shared with the Python package's tests in crates/weightstream-py/tests)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))

from harness import fixtures, pytest_report_header  # noqa: E402,F401  (registered with pytest here)
