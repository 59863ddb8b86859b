"""The extract step's per-item inputs read through the models' field dicts equal the attribute reads."""

from __future__ import annotations

import json
from typing import Any

from engine.auditor.trace_builder import _item_inputs
from engine.schemas import EvidenceBundle, EvidenceItem
from tests.golden.regenerate import CORPUS_DIR


def _by_attributes(item: EvidenceItem) -> dict[str, Any]:
    return {
        "content_type": item.content_type,
        "evidence_id": item.evidence_id,
        "requirement_id": item.requirement_id,
        "source_id": item.provenance.source_id,
        "tier": item.provenance.tier,
        "valid": item.is_valid,
    }


def _corpus_items() -> list[EvidenceItem]:
    items: list[EvidenceItem] = []
    for path in sorted(CORPUS_DIR.glob("*.json")):
        document = json.loads(path.read_bytes())
        items.extend(EvidenceBundle.model_validate(document["evidence_bundle"]).items)
    return items


def test_item_inputs_equal_the_attribute_reads_on_every_corpus_item() -> None:
    items = _corpus_items()
    assert any(not item.is_valid for item in items) and any(item.is_valid for item in items)
    for item in items:
        assert _item_inputs(item) == _by_attributes(item)


def test_item_inputs_of_failed_fetches_follow_is_valid() -> None:
    item = _corpus_items()[0]
    for success, error in ((True, None), (False, None), (True, "timeout"), (False, "timeout")):
        changed = item.model_copy(update={"success": success, "error": error})
        assert _item_inputs(changed)["valid"] is changed.is_valid is (success and error is None)


class _Renamed(EvidenceItem):
    """A subclass whose ``is_valid`` is not the base expression: the attribute path must be taken."""

    @property
    def is_valid(self) -> bool:
        return False


def test_a_subclass_takes_the_attribute_path() -> None:
    item = _corpus_items()[0]
    subclassed = _Renamed.model_validate(item.model_dump())
    assert item.is_valid and _item_inputs(subclassed)["valid"] is False
