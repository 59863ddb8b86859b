"""Verify Cournot PoR packs (the orchestrator's pack directories, zips or single documents)."""

from engine.por_pack.models import PackCheck, PackReport, PipelineReasoningStep, PipelineReasoningTrace
from engine.por_pack.order import MAX_ORDERINGS, settle_verdict_hash
from engine.por_pack.parts import PackParts, parts_from_document, parts_from_files
from engine.por_pack.verify import verify_pack_document, verify_pack_files, verify_parts

__all__ = [
    "MAX_ORDERINGS",
    "PackCheck",
    "PackParts",
    "PackReport",
    "PipelineReasoningStep",
    "PipelineReasoningTrace",
    "parts_from_document",
    "parts_from_files",
    "settle_verdict_hash",
    "verify_pack_document",
    "verify_pack_files",
    "verify_parts",
]
