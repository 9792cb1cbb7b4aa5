"""The Python package's tests (run in the plain venv, numpy arrays): the
fixtures and seed header of tests/fixtures/harness.py, shared with the
CLI-against-references suite in tests/python. transformers/ and torch_api/
are suites of their own, run by their paths in the venv with torch and
transformers (.venv-vllm), as scripts/test.sh does."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "fixtures"))

from harness import fixtures, pytest_report_header  # noqa: E402,F401  (registered with pytest here)

collect_ignore = ["transformers", "torch_api"]
