"""Every Python file of the project stays under 500 lines (the codebase's own rule, checked)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "ledger", "consumers", "api", "devstack", "cli", "tests", "bench", "build_backend")
LIMIT = 500


def test_no_python_file_reaches_the_limit() -> None:
    files = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]
    assert len(files) > 100  # the walk found the project
    too_long = {
        str(path.relative_to(ROOT)): count
        for path in files
        if (count := len(path.read_text(encoding="utf-8").splitlines())) >= LIMIT
    }
    assert too_long == {}, f"split these files (at most {LIMIT - 1} lines each): {too_long}"
