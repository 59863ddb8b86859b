"""Which record type a value is: the cheap routing test, kept apart from the PoR decoder.

:mod:`consumers.por_envelope` pulls in the PoR-pack verifier (``engine.por_pack``, the sentinel
models: a tenth of a second of imports); a consumer that only sees evidence bundles never needs
it, so :mod:`consumers.processing` imports this module and loads the decoder on the first PoR
record.
"""

from __future__ import annotations

__all__ = ["POR_ENVELOPE_SCHEMA_ID", "is_por_record"]

POR_ENVELOPE_SCHEMA_ID = "cournot-ledger/por-envelope"
_MARKER = POR_ENVELOPE_SCHEMA_ID.encode("ascii")


def is_por_record(raw: bytes | None) -> bool:
    """Cheap routing test: could this record be a PoR envelope? (The decoder decides for sure.)"""
    return bool(raw) and _MARKER in (raw or b"")
