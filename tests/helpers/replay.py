"""Helpers for the replay and verify tests (this module holds no tests of its own).

Submissions are real: corpus bundles wrapped in v1 envelopes, decoded and audited by the
consumer's own code and appended with ``LedgerStore.append_batch``, exactly as ``ledger consume``
does. Tampering runs as the database superuser with ``session_replication_role = replica``, which
bypasses the append-only triggers (what an attacker with superuser rights can do). The CLI runs in
a subprocess with a bounded timeout.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.envelope import EnvelopeError, decode_envelope, wrap_inputs
from ledger.store.drafts import audit_envelope
from ledger.store.ledger_store import LedgerStore
from ledger.store.records import SubmissionDraft
from tests.helpers.consumer import ledger_cli

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "samples" / "corpus"
CLI_TIMEOUT = 180.0


@dataclass(frozen=True)
class Stored:
    """One appended submission."""

    submission_id: str
    market_id: str
    steps: int
    idempotency_key: str


def corpus_files() -> list[Path]:
    """The corpus files the consumer accepts (the corpus also holds deliberately bad bundles)."""
    accepted = []
    for path in sorted(CORPUS.glob("*.json")):
        document = json.loads(path.read_bytes())
        raw = json.dumps(wrap_inputs(document["prompt_spec"], document["evidence_bundle"])).encode()
        try:
            decode_envelope(raw)
        except EnvelopeError:
            continue
        accepted.append(path)
    return accepted


def corpus_drafts(copies: int = 1, *, limit: int | None = None) -> list[SubmissionDraft]:
    """Audited drafts of the accepted corpus, ``copies`` times with distinct bundle ids."""
    drafts = []
    files = corpus_files()[:limit]
    for copy in range(copies):
        for path in files:
            document = json.loads(path.read_bytes())
            bundle = dict(document["evidence_bundle"])
            if copy:
                bundle["bundle_id"] = f"{bundle['bundle_id']}_copy{copy}"
            raw = json.dumps(wrap_inputs(document["prompt_spec"], bundle, event_id=f"{path.stem}-{copy}"))
            drafts.append(audit_envelope(decode_envelope(raw.encode())))
    return drafts


def build_ledger(url: str, copies: int = 1, *, limit: int | None = None) -> list[Stored]:
    """Append the corpus like the consumer does; returns the stored submissions in ledger order."""
    drafts = corpus_drafts(copies, limit=limit)
    with LedgerStore(url) as store:
        results = store.append_batch(drafts)
    assert all(result.status == "created" for result in results)
    return [
        Stored(result.submission_id, str(draft.market_id), len(draft.steps), draft.idempotency_key)
        for draft, result in zip(drafts, results, strict=True)
    ]


def ledger(
    url: str, *args: str, env: dict[str, str] | None = None, timeout: float = CLI_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` (``python -m cli``) against ``url`` in a fresh process."""
    return ledger_cli(*args, env={"LEDGER_DATABASE_URL": url, **(env or {})}, timeout=timeout)


def ledger_json(
    url: str, *args: str, env: dict[str, str] | None = None, timeout: float = CLI_TIMEOUT
) -> tuple[int, dict[str, Any]]:
    """``ledger ARGS --format json``: exit code and the parsed report."""
    done = ledger(url, *args, "--format", "json", env=env, timeout=timeout)
    try:
        report = json.loads(done.stdout)
    except ValueError as exc:
        raise AssertionError(
            f"no JSON on stdout (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
        ) from exc
    return done.returncode, report


def problems(report: dict[str, Any], code: str | None = None) -> list[dict[str, Any]]:
    """The error problems of a verify report (with ``code`` only, if given)."""
    return [p for p in report["problems"] if p["severity"] == "error" and (code is None or p["code"] == code)]
