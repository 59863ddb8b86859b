"""Auditing the corpus in fresh processes gives identical bytes whatever the hash seed, TZ or LANG."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from engine.envelope import EnvelopeError
from engine.envelope_inputs import decode_submission
from tests.golden.regenerate import corpus_paths, golden_path

ROOT = Path(__file__).resolve().parents[2]

# Runs the real CLI entry point on every corpus bundle and prints one digest per output.
SCRIPT = """
import contextlib, hashlib, io, json, sys
from cli.main import main
digests = {}
for path in sys.argv[1:]:
    buffer = io.BytesIO()
    stdout = io.TextIOWrapper(buffer, encoding="utf-8")
    with contextlib.redirect_stdout(stdout):
        code = main(["audit", path, "--format", "json"])
    stdout.flush()
    assert code == 0, (path, code)
    digests[path] = hashlib.sha256(buffer.getvalue()).hexdigest()
print(json.dumps(digests, sort_keys=True))
"""

ENVIRONMENTS = [
    {"PYTHONHASHSEED": "0", "TZ": "UTC", "LANG": "C.UTF-8"},
    {"PYTHONHASHSEED": "1", "TZ": "Pacific/Kiritimati", "LANG": "de_DE.UTF-8"},
    {"PYTHONHASHSEED": "4242", "TZ": "America/St_Johns", "LANG": "tr_TR.UTF-8"},
    {"PYTHONHASHSEED": "random", "TZ": "Asia/Kathmandu", "LANG": "ja_JP.UTF-8"},
]


def run_in(overrides: dict[str, str], paths: list[str]) -> dict[str, str]:
    env = {**os.environ, **overrides, "LC_ALL": overrides["LANG"]}
    env.pop("LEDGER_UPDATE_GOLDEN", None)
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, *paths], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    digests: dict[str, str] = json.loads(result.stdout)
    return digests


def accepted(path: Path) -> bool:
    """Whether ``ledger audit`` (the consumer's decoder) accepts the bundle."""
    try:
        decode_submission(path.read_bytes())
    except EnvelopeError:
        return False
    return True


def test_corpus_audits_are_byte_identical_across_seed_timezone_and_locale() -> None:
    audited = [path for path in corpus_paths() if accepted(path)]
    # the one bundle the consumer dead-letters; its golden pins the Auditor, not the CLI
    assert [path.name for path in corpus_paths() if path not in audited] == ["36_duplicate_evidence_ids.json"]
    paths = [str(path) for path in audited]
    runs = [run_in(env, paths) for env in ENVIRONMENTS]
    assert all(run == runs[0] for run in runs[1:])
    goldens = {str(path): hashlib.sha256(golden_path(path).read_bytes()).hexdigest() for path in audited}
    assert runs[0] == goldens
