"""The decoder's canonical bytes of each evidence item are reused for ``evidence_root``.

They must equal a fresh canonicalisation of each item (corpus, demo bundles and generated items),
the pipeline given them must commit exactly what it commits without them, and they are used only
for the very item objects they were made from: any other bundle is hashed afresh (fail closed).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.canonical import canonical_bytes
from engine.commitments import ItemCanonical, bundle_canonical, commit_inputs, evidence_root
from engine.envelope import DecodedEnvelope
from engine.pipeline import run_pipeline
from engine.schemas import EvidenceBundle, EvidenceItem, Provenance
from ledger.store.drafts import audit_envelope
from tests.helpers.consumer_drafts import decoded_bundles


def test_the_decoders_item_bytes_are_each_items_canonical_bytes() -> None:
    carried = 0
    for decoded in decoded_bundles():
        bundle = decoded.envelope.evidence_bundle
        items = decoded.evidence_items_canonical
        if items is None:
            continue
        carried += 1
        assert items.preimages_for(bundle) == tuple(canonical_bytes(item) for item in bundle.items)
    assert carried > 20  # the fast path is the common one


def test_the_pipeline_given_the_decoders_item_bytes_equals_the_pipeline_without_them() -> None:
    for decoded in decoded_bundles():
        spec, bundle = decoded.envelope.prompt_spec, decoded.envelope.evidence_bundle
        carried = run_pipeline(
            spec,
            bundle,
            prompt_spec_canonical=decoded.prompt_spec_canonical,
            evidence_items_canonical=decoded.evidence_items_canonical,
        )
        fresh = run_pipeline(spec, bundle)
        assert carried.canonical_json() == fresh.canonical_json()
        assert carried.roots.evidence_root == evidence_root(bundle)[0]
        consumer = audit_envelope(decoded)  # the consumer's path passes the decoder's bytes
        assert consumer.entries[-1].payload["roots"] == fresh.roots


def _with_items(decoded: DecodedEnvelope) -> tuple[EvidenceBundle, ItemCanonical]:
    bundle = decoded.envelope.evidence_bundle
    items = decoded.evidence_items_canonical
    assert items is not None
    return bundle, items


def _two_item_decoded() -> DecodedEnvelope:
    for decoded in decoded_bundles():
        if decoded.evidence_items_canonical is not None and len(decoded.envelope.evidence_bundle.items) >= 2:
            return decoded
    raise AssertionError("no corpus bundle with two items")


def test_item_bytes_are_refused_for_any_bundle_but_the_one_they_were_made_from() -> None:
    decoded = _two_item_decoded()
    bundle, items = _with_items(decoded)
    assert items.preimages_for(bundle) is not None
    copy = bundle.model_copy(deep=True)  # equal values, other objects
    assert copy == bundle and items.preimages_for(copy) is None
    swapped = bundle.model_copy(update={"items": list(reversed(bundle.items))})
    assert items.preimages_for(swapped) is None
    shorter = bundle.model_copy(update={"items": bundle.items[:-1]})
    assert items.preimages_for(shorter) is None
    longer = bundle.model_copy(update={"items": [*bundle.items, bundle.items[0]]})
    assert items.preimages_for(longer) is None
    replaced = bundle.model_copy(update={"items": [bundle.items[0].model_copy(), *bundle.items[1:]]})
    assert items.preimages_for(replaced) is None


def test_the_pipeline_hashes_afresh_a_bundle_the_carried_item_bytes_were_not_made_from() -> None:
    decoded = _two_item_decoded()
    bundle, items = _with_items(decoded)
    spec = decoded.envelope.prompt_spec
    changed_item = bundle.items[0].model_copy(update={"evidence_id": bundle.items[0].evidence_id})
    changed_item.provenance = changed_item.provenance.model_copy(
        update={"source_uri": "https://other.example"}
    )
    other = bundle.model_copy(update={"items": [changed_item, *bundle.items[1:]]})
    given_wrong = run_pipeline(spec, other, evidence_items_canonical=items)
    fresh = run_pipeline(spec, other)
    assert given_wrong.roots == fresh.roots
    assert given_wrong.roots.evidence_root != run_pipeline(spec, bundle).roots.evidence_root


def test_item_bytes_need_one_preimage_per_item() -> None:
    bundle, _ = _with_items(_two_item_decoded())
    with pytest.raises(ValueError, match="item preimages"):
        ItemCanonical(bundle.items, [b"{}"])


class _LoudItem(EvidenceItem):
    """A subclass: dumped by the declared schema inside a bundle, by its own alone."""

    note: str = "extra"


def test_a_bundle_holding_a_subclassed_item_carries_no_item_bytes() -> None:
    bundle, _ = _with_items(_two_item_decoded())
    loud = _LoudItem.model_validate(bundle.items[0].model_dump())
    mixed = bundle.model_copy(update={"items": [loud, *bundle.items[1:]]})
    whole, items = bundle_canonical(mixed)
    assert items is None
    assert whole == canonical_bytes(mixed)


any_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=8)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)
    | any_text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(any_text, children, max_size=3),
    max_leaves=12,
)
moments = (
    st.builds(
        lambda seconds, offset: datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds, minutes=offset),
        st.integers(0, 10**8),
        st.integers(-600, 600),
    )
    | st.none()
)
items = st.builds(
    lambda index, value, fields, fetched, raw, error, status: EvidenceItem(
        evidence_id=f"ev_{index}",
        requirement_id="req_001",
        provenance=Provenance(source_id="src", source_uri="https://src.example", fetched_at=fetched),
        raw_content=raw,
        parsed_value=value,
        error=error,
        status_code=status,
        extracted_fields=fields,
    ),
    st.integers(0, 999),
    json_values,
    st.dictionaries(any_text, json_values, max_size=3),
    moments,
    st.none() | any_text,
    st.none() | any_text,
    st.none() | st.integers(100, 599),
)


_CACHE: list[Any] = []


def _spec_and_trace() -> tuple[Any, Any]:
    """One corpus prompt spec and a trace made for it (commit_inputs needs a trace; its items are ours)."""
    if not _CACHE:
        decoded = decoded_bundles()[0]
        spec = decoded.envelope.prompt_spec
        _CACHE.extend([spec, run_pipeline(spec, decoded.envelope.evidence_bundle).trace])
    return _CACHE[0], _CACHE[1]


def commit_inputs_roots(bundle: EvidenceBundle, carried: ItemCanonical | None) -> tuple[str, int]:
    """``evidence_root`` as :func:`commit_inputs` computes it, with or without carried item bytes."""
    spec, trace = _spec_and_trace()
    inputs = commit_inputs(spec, bundle, trace, evidence_items=carried)
    return inputs.evidence_root, inputs.evidence_leaf_count


@given(st.lists(items, max_size=4), st.none() | st.floats(allow_nan=False, allow_infinity=False))
@settings(max_examples=300, deadline=None)
def test_bundle_canonical_equals_canonicalising_the_bundle_and_each_item(
    generated: list[EvidenceItem], execution_time_ms: Any
) -> None:
    bundle = EvidenceBundle(
        bundle_id="b", market_id="m", plan_id="p", items=generated, execution_time_ms=execution_time_ms
    )
    whole, carried = bundle_canonical(bundle)
    assert whole == canonical_bytes(bundle)
    if carried is not None:
        preimages = carried.preimages_for(bundle)
        assert preimages == tuple(canonical_bytes(item) for item in bundle.items)
        assert commit_inputs_roots(bundle, carried) == commit_inputs_roots(bundle, None)
