"""Replay's check of a stored ``submission.received`` payload, on its bytes, without rebuilding its text.

The payload the draft builder makes (:func:`ledger.store.drafts.payload_entries`) holds the
envelope header and options, the prompt spec and the evidence bundle, and three hashes. Its
canonical text is, in canonical key order::

    {"envelope":<header>,"envelope_options":<options>,"evidence_bundle":<bundle>,
     "evidence_root":<hash>,"inputs_hash":<hash>,"prompt_spec":<spec>,"prompt_spec_hash":<hash>}

where ``<spec>`` and ``<bundle>`` are the canonical bytes the decoder made from the very models the
payload holds (:attr:`~engine.envelope.DecodedEnvelope.prompt_spec_canonical`, proved bound to
them by :meth:`~engine.carried_inputs.InputsCanonical.vouches_for`). :func:`received_pieces` makes
the five small pieces around them from the decoded envelope and the replayed roots with the
store's canonical function; :func:`received_identical` compares the stored bytes with them and
with the two canonical inputs slice by slice (no UTF-8 decoding, no joined text, no second hash
of the spec). A payload of any other shape (a hash that is not a plain string, no proof) gets no
pieces: the caller then rebuilds the whole payload as before. The tests pin the joined pieces to
the draft builder's text for every corpus bundle.
"""

from __future__ import annotations

from engine.envelope import DecodedEnvelope
from engine.pipeline import PipelineResult
from ledger.store.hashing import canonical_text, quote

__all__ = ["ReceivedPieces", "received_identical", "received_pieces"]

ReceivedPieces = tuple[bytes, bytes, bytes, bytes, bytes]
"""``(head, bundle, middle, spec, tail)``: the received payload's canonical bytes, in order."""


def received_pieces(decoded: DecodedEnvelope, result: PipelineResult) -> ReceivedPieces | None:
    """The canonical bytes of the ``submission.received`` payload the draft builder makes for
    ``decoded`` and ``result``, in five pieces; None when the payload is not of the usual shape."""
    envelope = decoded.envelope
    spec, bundle = decoded.prompt_spec_canonical, decoded.evidence_bundle_canonical
    proof = decoded.inputs_canonical
    if (
        proof is None
        or not spec
        or not bundle
        or not proof.vouches_for(
            envelope.prompt_spec, envelope.evidence_bundle, spec, bundle, decoded.inputs_hash
        )
    ):
        return None
    roots = result.roots
    evidence_root, inputs_hash, spec_hash = roots.evidence_root, decoded.inputs_hash, roots.prompt_spec_hash
    if type(evidence_root) is not str or type(inputs_hash) is not str or type(spec_hash) is not str:
        return None  # a None member is dropped from the text: the whole payload is rebuilt instead
    header = {
        "schema_id": envelope.schema_id,
        "schema_version": envelope.schema_version,
        "event_id": envelope.event_id,
    }
    options = envelope.options.model_dump(mode="json", exclude_none=True)
    try:
        head = (
            f'{{"envelope":{canonical_text(header)},"envelope_options":{canonical_text(options)},'
            '"evidence_bundle":'
        ).encode()
        middle = f',"evidence_root":{quote(evidence_root)},"inputs_hash":{quote(inputs_hash)},"prompt_spec":'
        tail = f',"prompt_spec_hash":{quote(spec_hash)}}}'
        return head, bundle, middle.encode("utf-8"), spec, tail.encode("utf-8")
    except (ValueError, UnicodeEncodeError):  # not canonicalisable: the whole payload path decides
        return None


def received_identical(stored: bytes, pieces: ReceivedPieces) -> bool:
    """Whether ``stored`` (the stored payload text's UTF-8 bytes) is the five pieces joined."""
    head, bundle, middle, spec, tail = pieces
    bundle_at = len(head)
    middle_at = bundle_at + len(bundle)
    spec_at = middle_at + len(middle)
    tail_at = spec_at + len(spec)
    return (
        len(stored) == tail_at + len(tail)
        and stored.startswith(head)
        and stored.endswith(tail)
        and stored[middle_at:spec_at] == middle
        and stored[bundle_at:middle_at] == bundle
        and stored[spec_at:tail_at] == spec
    )
