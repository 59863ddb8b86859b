"""Replay's fast path (stored texts against the rebuilt draft, orjson parse) agrees with the exact path.

The fast path may only ever say "identical"; everything else, including a received payload orjson
would read differently (integers beyond 64 bits), is decided by the unchanged exact comparison.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from engine.canonical import canonical_bytes
from engine.envelope import ENVELOPE_SCHEMA_ID, ENVELOPE_SCHEMA_VERSION, decode_envelope
from engine.pipeline import run_pipeline
from ledger.replay.runner import _identical_fast, replay_case
from ledger.replay.source import ReplayCase
from ledger.store.drafts import submission_draft
from ledger.store.hashing import canonical_text

BUNDLE = (
    Path(__file__).resolve().parents[2]
    / "devstack"
    / "demo_corpus"
    / "bundles"
    / "01_btc_above_100k_clean.json"
)


def _case(document: dict[str, Any], **texts: str) -> ReplayCase:
    """The case replay would read for ``document`` appended by the consumer (``texts`` override payloads)."""
    header = {"schema_id": ENVELOPE_SCHEMA_ID, "schema_version": ENVELOPE_SCHEMA_VERSION}
    decoded = decode_envelope(json.dumps({**header, **document}).encode())
    result = run_pipeline(decoded.envelope.prompt_spec, decoded.envelope.evidence_bundle)
    draft = submission_draft(decoded, result, None)
    stored = {
        entry.kind: entry.canonical if entry.canonical is not None else canonical_text(entry.payload)
        for entry in draft.entries
    }
    return ReplayCase(
        submission_id="0x" + "11" * 32,
        market_id=decoded.market_id,
        first_seq=1,
        submission_engine_version=result.engine_version,
        entry_versions={"audit.completed": result.engine_version},
        received=texts.get("received", stored["submission.received"]),
        audit=texts.get("audit", stored["audit.completed"]),
        verdict=texts.get("verdict", stored["verdict.issued"]),
        step_ids=tuple(step.step_id for step in draft.steps),
        step_hashes=tuple(step.step_hash for step in draft.steps),
        step_texts=tuple(step.canonical_step for step in draft.steps),
    )


def test_an_identical_submission_takes_the_fast_path() -> None:
    case = _case(json.loads(BUNDLE.read_text()))
    assert _identical_fast(case) is not None
    outcome = replay_case(case)
    assert (outcome.status, outcome.differing, outcome.error) == ("identical", (), None)


def test_a_tampered_payload_leaves_the_fast_path_and_is_reported_by_the_exact_one() -> None:
    clean = _case(json.loads(BUNDLE.read_text()))
    audit = json.loads(clean.audit or "")
    audit["trace"]["trace_id"] = "tampered"
    case = _case(json.loads(BUNDLE.read_text()), audit=canonical_text(audit))
    assert _identical_fast(case) is None
    outcome = replay_case(case)
    assert outcome.status == "diverged"
    assert outcome.differing == ("audit.trace",)


def test_an_integer_beyond_64_bits_is_replayed_exactly_not_through_orjson() -> None:
    document = json.loads(BUNDLE.read_text())
    document["evidence_bundle"]["items"][0]["parsed_value"]["bitcoin"]["last_updated_at"] = 2**80 + 1
    case = _case(document)
    assert str(2**80 + 1) in (case.received or "")
    assert _identical_fast(case) is None  # orjson reads it as a float: the rebuilt text cannot match
    outcome = replay_case(case)
    assert (outcome.status, outcome.error) == ("identical", None)


def test_a_missing_payload_is_an_error_as_before() -> None:
    case = _case(json.loads(BUNDLE.read_text()))
    missing = ReplayCase(**{**case.__dict__, "verdict": None})
    assert _identical_fast(missing) is None
    outcome = replay_case(missing)
    assert outcome.status == "error"
    assert outcome.error == "stored inputs cannot be replayed: no verdict.issued entry"


def test_stored_inputs_holding_u0000_are_refused_with_the_consumers_reason() -> None:
    clean = _case(json.loads(BUNDLE.read_text()))
    received = json.loads(clean.received or "")
    received["prompt_spec"]["market"]["question"] += "\x00"
    text = canonical_text(received)
    assert "\\u0000" in text  # the escape the decoder's pre-check looks for in the stored bytes
    case = ReplayCase(**{**clean.__dict__, "received": text})
    assert _identical_fast(case) is None
    outcome = replay_case(case)
    assert outcome.status == "error"
    assert (outcome.error or "").startswith("stored inputs cannot be replayed: unstorable_text: ")
    assert (outcome.error or "").endswith("at $.prompt_spec.market.question")


@pytest.mark.parametrize(
    ("member", "field", "expected"),
    [
        ("prompt_spec", "question", "received.prompt_spec_hash"),
        ("evidence_bundle", "plan_id", "submission.received payload"),  # under inputs_hash only
    ],
)
def test_a_stored_input_changed_behind_its_hashes_diverges(member: str, field: str, expected: str) -> None:
    """Replay's prompt-spec bytes (and input hash) come from the stored inputs it decoded, so a
    stored spec or bundle changed without its hashes is a difference, not an echo of the stored text."""
    clean = _case(json.loads(BUNDLE.read_text()))
    received = json.loads(clean.received or "")
    target = received[member]["market"] if field == "question" else received[member]
    target[field] = f"{target.get(field)} (changed)"
    case = ReplayCase(**{**clean.__dict__, "received": canonical_text(received)})
    assert _identical_fast(case) is None
    outcome = replay_case(case)
    assert outcome.status == "diverged"
    assert expected in outcome.differing


def test_rebuilt_payload_bytes_are_the_stores_canonical_text_for_every_corpus_bundle() -> None:
    """The fast path's one-walk canonical bytes equal ``canonical_text``, the store's, payloads with
    None members (check details, evaluation variables) included."""
    from ledger.replay.identical import _rebuilt_bytes
    from tests.helpers.replay import corpus_drafts

    nulls = 0
    for draft in corpus_drafts():
        for entry in draft.entries:
            if entry.canonical is None:
                assert _rebuilt_bytes(entry.payload) == canonical_text(entry.payload).encode("utf-8")
                nulls += entry.kind == "audit.completed" and "null" in json.dumps(entry.payload, default=str)
    assert nulls > 0  # the corpus does exercise the pruning of None members


def test_a_stored_payload_holding_a_null_member_is_not_canonical_and_diverges() -> None:
    """A stored audit payload that parses to the same value once nulls are dropped still differs byte
    for byte from the canonical text: the fast path gives up and the exact path reports the payload."""
    clean = _case(json.loads(BUNDLE.read_text()))
    text = clean.audit or ""
    assert text.startswith("{")
    case = ReplayCase(**{**clean.__dict__, "audit": '{"added":null,' + text[1:]})
    assert _identical_fast(case) is None
    outcome = replay_case(case)
    assert outcome.status == "diverged"
    assert outcome.differing == ("audit.completed payload",)


def test_a_missing_audit_payload_is_an_error_not_a_fast_identical() -> None:
    case = _case(json.loads(BUNDLE.read_text()))
    missing = ReplayCase(**{**case.__dict__, "audit": None})
    assert _identical_fast(missing) is None
    outcome = replay_case(missing)
    assert (outcome.status, outcome.error) == (
        "error",
        "stored inputs cannot be replayed: no audit.completed entry",
    )


def test_a_missing_step_row_diverges() -> None:
    case = _case(json.loads(BUNDLE.read_text()))
    short = ReplayCase(
        **{
            **case.__dict__,
            "step_ids": case.step_ids[:-1],
            "step_hashes": case.step_hashes[:-1],
            "step_texts": case.step_texts[:-1],
        }
    )
    assert _identical_fast(short) is None
    outcome = replay_case(short)
    assert outcome.status == "diverged"
    assert outcome.steps == len(case.step_texts) - 1


def test_the_verdict_member_proved_by_its_bytes_or_hash_matches_exactly_what_serialising_it_would() -> None:
    """The stored verdict payload's ``verdict`` member is checked against the engine's canonical
    bytes of the verdict (``verdict_canonical``), or ``roots.verdict_hash`` without them, instead of
    being serialised again: same answer as the whole-text comparison, both ways, for the payload as
    stored and for texts changed inside, before and after that member."""
    from ledger.replay.identical import _matches_rebuilt
    from ledger.store.drafts import submission_draft

    header = {"schema_id": ENVELOPE_SCHEMA_ID, "schema_version": ENVELOPE_SCHEMA_VERSION}
    decoded = decode_envelope(json.dumps({**header, **json.loads(BUNDLE.read_text())}).encode())
    result = run_pipeline(decoded.envelope.prompt_spec, decoded.envelope.evidence_bundle)
    [entry] = [e for e in submission_draft(decoded, result, None).entries if e.kind == "verdict.issued"]
    assert entry.payload["verdict"] is result.verdict  # the member the hash stands for
    stored = canonical_text(entry.payload)
    verdict = canonical_text(result.verdict)
    changed = [
        stored.replace(verdict, verdict.replace('"confidence":', '"confidence":0.0,"x":', 1)),
        stored.replace(verdict, verdict + " "),
        stored.replace('"roots":{', '"roots":{"a":1,', 1),
        stored[:-1] + ',"zz":1}',
        stored[:-1],
        "{}",
    ]
    assert result.verdict_canonical == canonical_bytes(result.verdict)  # the preimage of verdict_hash
    assert "0x" + hashlib.sha256(result.verdict_canonical).hexdigest() == result.roots.verdict_hash
    for preimage in (result.verdict_canonical, b""):  # b"": a result without the bytes
        assert _matches_rebuilt(stored, entry.payload, result.verdict, result.roots.verdict_hash, preimage)
        for text in changed:
            assert text != stored
            assert not _matches_rebuilt(
                text, entry.payload, result.verdict, result.roots.verdict_hash, preimage
            )
        # a payload without that member is serialised whole
        assert _matches_rebuilt(stored, entry.payload, object(), "0x00", preimage)
        assert not _matches_rebuilt(changed[0], entry.payload, object(), "0x00", preimage)


def test_a_stored_verdict_with_another_outcome_diverges() -> None:
    clean = _case(json.loads(BUNDLE.read_text()))
    verdict = json.loads(clean.verdict or "")
    verdict["verdict"]["confidence"] = 0.123
    case = ReplayCase(**{**clean.__dict__, "verdict": canonical_text(verdict)})
    assert _identical_fast(case) is None
    outcome = replay_case(case)
    assert outcome.status == "diverged"
    assert outcome.differing and outcome.first is not None


def _as_bytes(case: ReplayCase) -> ReplayCase:
    """``case`` as :func:`~ledger.replay.source.iter_replay_pages` reads it: texts as UTF-8 bytes."""
    encoded = {
        name: None if getattr(case, name) is None else getattr(case, name).encode("utf-8")
        for name in ("received", "audit", "verdict")
    }
    steps = tuple(text.encode("utf-8") for text in case.step_texts)
    return ReplayCase(**{**case.__dict__, **encoded, "step_texts": steps})


def test_texts_read_as_bytes_replay_exactly_as_strings() -> None:
    """Both forms of the stored texts give the same outcome, on the fast path and on the exact one
    (a changed step, payload or received text; a missing payload)."""
    clean = _case(json.loads(BUNDLE.read_text()))
    steps = list(clean.step_texts)
    steps[0] = steps[0].replace('"step_id"', '"step_id" ', 1)
    variants = [
        clean,
        ReplayCase(**{**clean.__dict__, "step_texts": tuple(steps)}),
        ReplayCase(**{**clean.__dict__, "audit": (clean.audit or "")[:-1] + ',"zz":1}'}),
        ReplayCase(**{**clean.__dict__, "verdict": (clean.verdict or "").replace(":", ": ", 1)}),
        ReplayCase(**{**clean.__dict__, "received": (clean.received or "").replace("BTC", "ETH", 1)}),
        ReplayCase(**{**clean.__dict__, "verdict": None}),
    ]
    assert _identical_fast(_as_bytes(clean)) is not None
    for case in variants[1:]:
        assert _identical_fast(_as_bytes(case)) is None
    for case in variants:
        assert replay_case(_as_bytes(case)) == replay_case(case)
    assert [replay_case(case).status for case in variants] == ["identical", *["diverged"] * 4, "error"]
