"""Golden outputs: every byte of ``ledger audit --format json`` on the corpus is pinned.

A changed step hash, root, check or evaluation variable fails here. To accept an intended change,
bump ENGINE_VERSION and regenerate deliberately (see ``tests/golden/regenerate.py``)::

    .venv/bin/python -m tests.golden.regenerate
    LEDGER_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_auditor_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.version import ENGINE_VERSION
from tests.golden.regenerate import GOLDEN_DIR, UPDATE_ENV, audit_output, corpus_paths, golden_path

CORPUS = corpus_paths()


def test_corpus_has_at_least_30_bundles_each_with_a_golden() -> None:
    assert len(CORPUS) >= 30
    assert sorted(path.name for path in GOLDEN_DIR.glob("*.json")) == [path.name for path in CORPUS]


def _differences(expected: dict, actual: dict) -> list[str]:
    lines = [
        f"{key}: {expected.get(key)} -> {actual.get(key)}"
        for key in ("reasoning_root", "evidence_root", "prompt_spec_hash", "engine_version")
        if expected.get(key) != actual.get(key)
    ]
    for index, (old, new) in enumerate(
        zip(expected.get("step_hashes", []), actual.get("step_hashes", []), strict=False)
    ):
        if old != new:
            lines.append(f"step {index + 1}: {old} -> {new}")
    if expected.get("evaluation_variables") != actual.get("evaluation_variables"):
        lines.append("evaluation_variables changed")
    return lines


@pytest.mark.parametrize("path", CORPUS, ids=lambda path: path.stem)
def test_audit_output_matches_golden(path: Path) -> None:
    actual = audit_output(path)
    target = golden_path(path)
    if os.environ.get(UPDATE_ENV) == "1":
        target.write_text(actual, encoding="utf-8")
        return
    assert target.exists(), f"no golden for {path.name}; run python -m tests.golden.regenerate"
    expected = target.read_text(encoding="utf-8")
    if actual != expected:
        details = "\n".join(_differences(json.loads(expected), json.loads(actual))) or "(text differs)"
        pytest.fail(
            f"{path.name} differs from its golden (engine {ENGINE_VERSION}):\n{details}\n"
            "if intended: bump ENGINE_VERSION and run python -m tests.golden.regenerate"
        )


@pytest.mark.parametrize("path", CORPUS, ids=lambda path: path.stem)
def test_golden_files_are_self_consistent(path: Path) -> None:
    golden = json.loads(golden_path(path).read_text(encoding="utf-8"))
    steps = golden["trace"]["steps"]
    assert golden["reasoning_leaf_count"] == len(steps) == len(golden["step_hashes"])
    assert golden["evaluation_variables"] == steps[-1]["output"]["evaluation_variables"]
    assert golden["engine_version"] == golden["trace"]["policy"]["extra"]["engine_version"]
