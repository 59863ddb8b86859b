"""The fields of one evidence item that extraction reads, read once per item.

A Pydantic attribute read is not cheap (the model class defines ``__getattr__``, so every read
takes the slow lookup path); extraction reads an item's fields from this record instead. For an
exact :class:`EvidenceItem` with an exact :class:`Provenance` the values come from the models' own
field dicts (two reads in all); a subclass, which may override a field with a property, is read
attribute by attribute. The values are ``Any``: they are passed on exactly as the model holds them.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from engine.auditor.record import Record
from engine.schemas import EvidenceItem, Provenance

__all__ = ["ItemFields", "item_fields"]

# Imported model classes as ``Final`` names: a compiled build reads them from C statics, not
# from the module dict at each use (they are defined in interpreted modules).
_EVIDENCE_ITEM: Final = EvidenceItem
_PROVENANCE: Final = Provenance


class ItemFields(Record):
    """An evidence item's fields as extraction uses them (``valid`` is :attr:`EvidenceItem.is_valid`)."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "evidence_id",
        "requirement_id",
        "content_type",
        "raw_content",
        "parsed_value",
        "valid",
        "extracted_fields",
        "tier",
        "fetched_at",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        evidence_id: Any,
        requirement_id: Any,
        content_type: Any,
        raw_content: Any,
        parsed_value: Any,
        valid: Any,
        extracted_fields: Any,
        tier: Any,
        fetched_at: Any,
    ) -> None:
        self.evidence_id: Final = evidence_id
        self.requirement_id: Final = requirement_id
        self.content_type: Final = content_type
        self.raw_content: Final = raw_content
        self.parsed_value: Final = parsed_value
        self.valid: Final = valid
        self.extracted_fields: Final = extracted_fields
        self.tier: Final = tier
        self.fetched_at: Final = fetched_at


def item_fields(item: EvidenceItem) -> ItemFields:
    """The fields of ``item`` (and of its provenance) that extraction reads."""
    provenance = item.provenance
    if type(item) is _EVIDENCE_ITEM and type(provenance) is _PROVENANCE:
        fields, origin = item.__dict__, provenance.__dict__
        return ItemFields(
            fields["evidence_id"],
            fields["requirement_id"],
            fields["content_type"],
            fields["raw_content"],
            fields["parsed_value"],
            fields["success"] and fields["error"] is None,  # the ``is_valid`` property's expression
            fields["extracted_fields"],
            origin["tier"],
            origin["fetched_at"],
        )
    return ItemFields(
        item.evidence_id,
        item.requirement_id,
        item.content_type,
        item.raw_content,
        item.parsed_value,
        item.is_valid,
        item.extracted_fields,
        provenance.tier,
        provenance.fetched_at,
    )
