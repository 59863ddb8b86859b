"""Issue 6: ``ledger replay`` re-runs the engine on stored inputs and compares byte for byte."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from ledger.replay.source import parse_since
from ledger.store.hashing import canonical_text
from tests.helpers.database import query, rewrite_step, tamper
from tests.helpers.replay import build_ledger, ledger, ledger_json

pytestmark = pytest.mark.integration

OTHER_PROCESS = {
    "PYTHONHASHSEED": "4242",
    "TZ": "Pacific/Chatham",
    "LANG": "de_DE.UTF-8",
    "LC_ALL": "C.UTF-8",
}


def step_row(url: str, submission_id: str, step_index: int) -> tuple[str, str, str, int]:
    """``(canonical_step, step_hash, step_id, global_seq)`` of one stored step."""
    [row] = query(
        url,
        "SELECT canonical_step, step_hash, step_id, global_seq FROM ledger_store.trace_steps "
        "WHERE submission_id = %(s)s AND step_index = %(i)s",
        {"s": submission_id, "i": step_index},
    )
    return row[0], row[1], row[2], row[3]


def rewrite_step_action(url: str, submission_id: str, step_index: int) -> tuple[str, str]:
    """Append ``_tampered`` to a stored step's ``action`` (hash column untouched); returns (old, new)."""
    text, _, _, _ = step_row(url, submission_id, step_index)
    step = json.loads(text)
    old = step["action"]
    step["action"] = f"{old}_tampered"
    rewrite_step(url, submission_id, step_index, canonical_text(step))
    return old, step["action"]


def test_replay_all_is_100_percent_identical_in_a_fresh_process_under_another_hash_seed_and_time_zone(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    stored = build_ledger(url)

    code, report = ledger_json(url, "replay", "--all", env=OTHER_PROCESS)

    assert code == 0, report
    summary = report["summary"]
    assert summary["submissions"] == summary["identical"] == len(stored) > 30
    assert summary["identical_percent"] == 100.0
    assert summary["steps"] == sum(item.steps for item in stored)
    assert summary["diverged"] == summary["version_drift"] == summary["error"] == 0
    assert report["ok"] and report["results"] == []
    again_code, again = ledger_json(url, "replay", "--all", env={"PYTHONHASHSEED": "1", "TZ": "UTC"})
    assert again_code == 0
    assert again["summary"]["results_root"] == summary["results_root"]


def test_a_tampered_step_diverges_at_that_step_with_a_diff_of_its_canonical_json(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=6)
    target = stored[2]
    old, new = rewrite_step_action(url, target.submission_id, 1)
    _, _, step_id, _ = step_row(url, target.submission_id, 1)

    code, report = ledger_json(url, "replay", "--all")

    assert code == 1
    assert report["summary"]["diverged"] == 1 and report["summary"]["identical"] == len(stored) - 1
    [result] = report["results"]
    assert result["submission_id"] == target.submission_id and result["status"] == "diverged"
    assert result["differing"] == ["steps"]
    first = result["first_difference"]
    assert (first["component"], first["step_index"], first["step_id"]) == ("step", 1, step_id)
    diff_lines = first["diff"].splitlines()
    assert f'-  "action": "{new}",' in diff_lines
    assert f'+  "action": "{old}",' in diff_lines
    assert json.loads(first["replayed"])["action"] == old


def test_text_output_names_the_diverged_submission_and_its_first_step(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=3)
    rewrite_step_action(url, stored[0].submission_id, 2)

    done = ledger(url, "replay", "--submission", stored[0].idempotency_key)

    assert done.returncode == 1, done.stderr
    assert f"DIVERGED      {stored[0].submission_id}" in done.stdout
    assert "first difference: step 2 (step_0003), step" in done.stdout
    assert "result: DIVERGED, 0.0% identical" in done.stdout
    assert "replay [" not in done.stderr  # stderr is not a TTY and --progress was not given


def test_a_rewritten_engine_version_is_version_drift_not_divergence(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=4)
    target = stored[1].submission_id
    tamper(
        url,
        "UPDATE ledger_store.submissions SET engine_version = '0.9.0' WHERE submission_id = %(s)s",
        {"s": target},
    )
    tamper(
        url,
        "UPDATE ledger_store.entries SET engine_version = '0.9.0' WHERE submission_id = %(s)s",
        {"s": target},
    )

    code, report = ledger_json(url, "replay", "--all")

    assert code == 0, report
    summary = report["summary"]
    assert (summary["version_drift"], summary["diverged"], summary["identical"]) == (1, 0, 3)
    [result] = report["results"]
    assert result["submission_id"] == target and result["status"] == "version_drift"
    assert result["recorded_engine_version"] == "0.9.0" and result["differing"] == []
    assert any("version drift, not nondeterminism" in note for note in report["notes"])
    strict_code, _ = ledger_json(url, "replay", "--all", "--fail-on-drift")
    assert strict_code == 1


def test_submission_market_and_since_select_what_is_replayed(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=12)
    market = stored[0].market_id
    in_market = [item.submission_id for item in stored if item.market_id == market]

    _, by_market = ledger_json(url, "replay", "--market", market, "--show-identical")
    _, by_key = ledger_json(url, "replay", "--submission", stored[3].idempotency_key, "--show-identical")
    [[received_seq]] = query(
        url,
        "SELECT global_seq FROM ledger_store.entries WHERE submission_id = %(s)s AND kind = 'submission.received'",
        {"s": stored[4].submission_id},
    )
    _, since = ledger_json(url, "replay", "--since", str(received_seq), "--show-identical")
    missing = ledger(url, "replay", "--submission", "no-such-submission")

    assert [item["submission_id"] for item in by_market["results"]] == in_market
    assert [item["submission_id"] for item in by_key["results"]] == [stored[3].submission_id]
    assert by_key["summary"]["steps"] == stored[3].steps
    assert [item["submission_id"] for item in since["results"]] == [item.submission_id for item in stored[5:]]
    assert missing.returncode == 2 and "no submission 'no-such-submission'" in missing.stderr


def test_worker_processes_give_the_same_outcomes_as_inline_replay(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=10)
    rewrite_step_action(url, stored[7].submission_id, 0)

    inline_code, inline = ledger_json(url, "replay", "--all", "--jobs", "1")
    workers_code, workers = ledger_json(url, "replay", "--all", "--jobs", "2")

    assert inline_code == workers_code == 1
    assert (inline["summary"]["jobs"], workers["summary"]["jobs"]) == (1, 2)
    assert workers["summary"]["results_root"] == inline["summary"]["results_root"]
    assert workers["results"] == inline["results"]


def test_progress_bar_goes_to_stderr_when_asked(migrated_database_url: str) -> None:
    url = migrated_database_url
    build_ledger(url, limit=3)

    done = ledger(url, "replay", "--all", "--progress")

    assert done.returncode == 0, done.stderr
    assert "replay [##############################] 3/3" in done.stderr
    assert "identical                  3" in done.stdout


def test_record_appends_replay_verified_to_each_chain_and_the_ledger_still_verifies(
    migrated_database_url: str,
) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=3)
    heads = dict(query(url, "SELECT submission_id, max(stream_seq) FROM ledger_store.entries GROUP BY 1"))

    code, report = ledger_json(url, "replay", "--all", "--record")

    assert code == 0, report
    assert report["recorded"] == {"kind": "replay.verified", "created": 3, "existing": 0}
    rows = query(
        url,
        "SELECT e.submission_id, e.stream_seq, e.payload, v.por_root FROM ledger.entries e "
        "JOIN ledger.verdicts v USING (submission_id) WHERE e.kind = 'replay.verified' ORDER BY e.global_seq",
    )
    assert [row[0] for row in rows] == [item.submission_id for item in stored]
    for submission_id, stream_seq, payload, por_root in rows:
        assert stream_seq == heads[submission_id] + 1
        assert payload["status"] == "identical" and payload["por_root"] == por_root
    verify_code, verified = ledger_json(url, "verify", "--no-translog")
    assert verify_code == 0, verified["problems"]
    again_code, again = ledger_json(url, "replay", "--all")
    assert again_code == 0 and again["summary"]["identical"] == 3


def test_since_reads_a_global_seq_a_duration_or_an_iso_moment() -> None:
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)

    assert parse_since("1234", now=now) == (1234, None)
    assert parse_since("90m", now=now) == (None, datetime(2026, 11, 21, 10, 30, tzinfo=UTC))
    assert parse_since("2d", now=now) == (None, datetime(2026, 11, 19, 12, 0, tzinfo=UTC))
    assert parse_since("2026-11-01", now=now) == (None, datetime(2026, 11, 1, tzinfo=UTC))
    assert parse_since("2026-11-01T08:00:00+02:00", now=now)[1] == datetime(2026, 11, 1, 6, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="--since 'soon'"):
        parse_since("soon")


def test_since_a_time_selects_by_append_time(migrated_database_url: str) -> None:
    url = migrated_database_url
    stored = build_ledger(url, limit=3)

    _, recent = ledger_json(url, "replay", "--since", "1h")
    _, future = ledger_json(url, "replay", "--since", "2999-01-01")

    assert recent["summary"]["submissions"] == len(stored)
    assert future["summary"]["submissions"] == 0 and future["ok"]
