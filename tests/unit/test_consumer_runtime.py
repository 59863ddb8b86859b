"""The consumer process's own settings: the tuned collector is applied for the run and undone
after, and the PoR verifier is imported only when a PoR record arrives."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from consumers.por_envelope import is_por_record as exported_is_por_record
from consumers.por_route import POR_ENVELOPE_SCHEMA_ID, is_por_record
from ledger.collection import THRESHOLDS, tuned_gc


def test_tuned_gc_applies_thresholds_and_freezes_then_restores() -> None:
    before = gc.get_threshold()
    assert before != THRESHOLDS
    with tuned_gc():
        assert gc.get_threshold() == THRESHOLDS
        assert gc.get_freeze_count() > 0
        assert gc.isenabled()  # collection stays automatic: cyclic garbage is still reclaimed
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_tuned_gc_restores_after_an_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), tuned_gc():
        raise RuntimeError("boom")
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_tuned_gc_disabled_changes_nothing() -> None:
    before = gc.get_threshold()
    with tuned_gc(enabled=False):
        assert gc.get_threshold() == before
        assert gc.get_freeze_count() == 0


def test_cyclic_garbage_is_still_collected_while_tuned() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    with tuned_gc():
        gc.collect()
        for _ in range(1000):
            Node()
        assert gc.collect() >= 1000


def test_routing_test_is_the_decoders() -> None:
    assert exported_is_por_record is is_por_record
    assert is_por_record(b'{"schema_id": "' + POR_ENVELOPE_SCHEMA_ID.encode() + b'"}')
    assert not is_por_record(b'{"prompt_spec": {}}')
    assert not is_por_record(b"")
    assert not is_por_record(None)


def test_the_consumer_path_does_not_import_the_por_verifier() -> None:
    code = (
        "import sys, consumers.consumer, consumers.processing, cli.consume; "
        "print(sorted(m for m in sys.modules if m.startswith(('engine.por_pack', 'engine.sentinel', "
        "'consumers.por_envelope'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
