"""The log commands end to end: keygen, checkpoint (file and Kafka export), prove, export-log,
verify-log, and audit-log checking their output with no database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cli.main import main
from ledger.connect import libpq_url
from ledger.settings import get_settings
from ledger.store.ledger_store import LedgerStore
from ledger.translog.checkpoints import list_checkpoints
from tests.helpers.ledger_factories import audited

pytestmark = pytest.mark.integration


@pytest.fixture
def env(migrated_database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Ledger settings for the CLI and a fresh key; returns the private key path."""
    key = tmp_path / "keys" / "log.key"
    monkeypatch.setenv("LEDGER_DATABASE_URL", migrated_database_url)
    monkeypatch.setenv("LEDGER_SIGNING_KEY", str(key))
    get_settings.cache_clear()
    assert main(["keygen", "--out", str(key)]) == 0
    yield key
    get_settings.cache_clear()


def _append(store: LedgerStore, keys: list[str]) -> list[Any]:
    return [store.append(audited(key)) for key in keys]


def test_checkpoint_signs_stores_and_writes_the_note(
    env: Path, ledger_store: LedgerStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _append(ledger_store, ["a", "b"])
    assert main(["checkpoint", "--out", str(tmp_path / "cp.note")]) == 0
    note = (tmp_path / "cp.note").read_text()
    assert capsys.readouterr().out == note
    assert note.split("\n")[1] == str(ledger_store.max_seq())
    assert main(["audit-log", "--public-key", f"{env}.pub", str(tmp_path / "cp.note")]) == 0


def test_checkpoint_without_a_key_is_refused(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LEDGER_SIGNING_KEY")
    get_settings.cache_clear()
    assert main(["checkpoint"]) == 2  # an environment error: the check never ran
    assert "no signing key" in capsys.readouterr().err


def test_proofs_from_prove_pass_audit_log_and_a_tampered_one_fails(
    env: Path, ledger_store: LedgerStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _append(ledger_store, ["p1", "p2", "p3"])
    assert main(["checkpoint"]) == 0
    old_size = ledger_store.max_seq()
    _append(ledger_store, ["p4"])
    assert main(["checkpoint"]) == 0
    new_size = ledger_store.max_seq()
    proofs = tmp_path / "proofs"
    proofs.mkdir()
    assert main(["prove", "4", "--with-payload", "--out", str(proofs / "entry4.json")]) == 0
    assert main(["prove", results[1].submission_id, "--out", str(proofs / "submission.json")]) == 0
    assert main(["prove", "p3", "--out", str(proofs / "by-key.json")]) == 0
    args = ["prove", "--consistency", str(old_size), str(new_size), "--out", str(proofs / "consistency.json")]
    assert main(args) == 0
    capsys.readouterr()
    assert main(["audit-log", "--public-key", f"{env}.pub", str(proofs)]) == 0
    report = capsys.readouterr().out
    assert "audit passed" in report and "global_seq 4" in report

    bundle = json.loads((proofs / "entry4.json").read_text())
    bundle["entry"]["payload_canonical"] = bundle["entry"]["payload_canonical"].replace("step", "stop", 1)
    (proofs / "entry4.json").write_text(json.dumps(bundle))
    assert main(["audit-log", "--public-key", f"{env}.pub", str(proofs)]) == 1
    failed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("FAIL")]
    assert len(failed) == 1 and "entry4.json" in failed[0] and "payload_hash" in failed[0]


def test_prove_names_what_it_cannot_prove(
    env: Path, ledger_store: LedgerStore, capsys: pytest.CaptureFixture[str]
) -> None:
    _append(ledger_store, ["n1"])
    # nothing to prove against, an unknown entry, sizes out of range: usage errors (2), not tampering
    assert main(["prove", "1"]) == 2
    assert "no checkpoint yet" in capsys.readouterr().err
    assert main(["checkpoint"]) == 0
    _append(ledger_store, ["n2"])
    assert main(["prove", str(ledger_store.max_seq())]) == 2
    assert "not covered by checkpoint" in capsys.readouterr().err
    assert main(["prove", "999999"]) == 2
    assert main(["prove", "--consistency", "5", "2"]) == 2


def test_export_log_gives_an_auditor_everything_to_check_the_history(
    env: Path, ledger_store: LedgerStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for batch in (["e1"], ["e2", "e3"], ["e4"]):
        _append(ledger_store, batch)
        assert main(["checkpoint"]) == 0
    assert main(["export-log", "--out", str(tmp_path / "export"), "--with-payload"]) == 0
    capsys.readouterr()
    assert main(["audit-log", "--public-key", f"{env}.pub", str(tmp_path / "export")]) == 0
    out = capsys.readouterr().out
    assert "3 checkpoint(s) form one append-only history" in out
    assert sorted(p.name for p in (tmp_path / "export" / "proofs").iterdir())[0].startswith("consistency-")


def test_verify_log_passes_on_an_untouched_ledger(
    env: Path, ledger_store: LedgerStore, capsys: pytest.CaptureFixture[str]
) -> None:
    _append(ledger_store, ["v1", "v2"])
    assert main(["checkpoint"]) == 0
    _append(ledger_store, ["v3"])
    assert main(["verify-log"]) == 0
    out = capsys.readouterr().out
    assert "verify-log: ok" in out
    assert "tree_behind" not in out  # the append transaction put v3 in the tree already


def test_checkpoints_published_to_kafka_are_audited_from_the_topic(
    env: Path,
    ledger_store: LedgerStore,
    kafka_bootstrap: str,
    topic_name: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _append(ledger_store, ["k1"])
    assert main(["checkpoint", "--topic", topic_name, "--bootstrap", kafka_bootstrap]) == 0
    old_size = ledger_store.max_seq()
    _append(ledger_store, ["k2"])
    assert main(["checkpoint", "--topic", topic_name, "--bootstrap", kafka_bootstrap]) == 0
    capsys.readouterr()
    audit = ["audit-log", "--public-key", f"{env}.pub", "--topic", topic_name, "--bootstrap", kafka_bootstrap]
    assert main(audit) == 1  # two signed sizes, and nothing yet proves the older a prefix of the newer
    assert "not proven consistent" in capsys.readouterr().out
    proof = tmp_path / "consistency.json"
    assert (
        main(["prove", "--consistency", str(old_size), str(ledger_store.max_seq()), "--out", str(proof)]) == 0
    )
    assert main([*audit, str(proof)]) == 0
    assert "topic " in capsys.readouterr().out


def _checkpoint_count(url: str) -> int:
    with psycopg.connect(libpq_url(url)) as conn:
        return len(list_checkpoints(conn))


def test_checkpoint_out_with_a_trailing_slash_creates_a_directory_and_never_overwrites(
    env: Path, ledger_store: LedgerStore, migrated_database_url: str, tmp_path: Path
) -> None:
    _append(ledger_store, ["d1"])
    first_size = ledger_store.max_seq()
    folder = tmp_path / "cp"
    assert main(["checkpoint", "--out", f"{folder}/"]) == 0
    [first] = folder.iterdir()
    assert first.name.startswith(f"checkpoint-{first_size}-") and first.suffix == ".note"
    _append(ledger_store, ["d2"])
    assert main(["checkpoint", "--out", str(folder)]) == 0  # an existing folder, no slash: still a folder
    assert len(list(folder.iterdir())) == 2 and first.read_text().split("\n")[1] == str(first_size)
    assert _checkpoint_count(migrated_database_url) == 2


def test_checkpoint_out_refuses_an_existing_file_before_signing_unless_forced(
    env: Path,
    ledger_store: LedgerStore,
    migrated_database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _append(ledger_store, ["f1"])
    target = tmp_path / "cp.note"
    assert main(["checkpoint", "--out", str(target)]) == 0
    first = target.read_text()
    capsys.readouterr()
    _append(ledger_store, ["f2"])
    assert main(["checkpoint", "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert "file exists" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert target.read_text() == first and _checkpoint_count(migrated_database_url) == 1
    assert main(["checkpoint", "--out", str(target), "--force"]) == 0
    assert target.read_text() != first and target.read_text().split("\n")[1] == str(ledger_store.max_seq())


def test_checkpoint_whose_export_fails_says_it_was_stored_and_how_to_export_it_again(
    env: Path,
    ledger_store: LedgerStore,
    migrated_database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _append(ledger_store, ["full1"])
    # /dev/full accepts the open and fails every write (ENOSPC), after the checkpoint was signed and stored
    assert main(["checkpoint", "--out", "/dev/full", "--force"]) == 2
    err = capsys.readouterr().err
    assert _checkpoint_count(migrated_database_url) == 1
    assert "is stored, but exporting it failed" in err and "No space left" in err
    assert "ledger export-log" in err
    out = tmp_path / "exported"
    assert main(["export-log", "--out", str(out)]) == 0
    assert len(list((out / "checkpoints").glob("*.note"))) == 1


def test_verify_log_warns_about_unchecked_signatures_only_when_a_checkpoint_exists(
    env: Path, ledger_store: LedgerStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _append(ledger_store, ["w1"])
    # no checkpoint yet: there is no signature to leave unchecked
    monkeypatch.delenv("LEDGER_SIGNING_KEY")
    get_settings.cache_clear()
    capsys.readouterr()
    assert main(["verify-log"]) == 0
    assert "signatures_unchecked" not in capsys.readouterr().out
    assert main(["checkpoint", "--key", str(env)]) == 0
    capsys.readouterr()
    assert main(["verify-log"]) == 0
    assert "warning signatures_unchecked" in capsys.readouterr().out
