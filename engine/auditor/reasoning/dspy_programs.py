"""Optional DSPy programs for the Auditor: a documented no-op scaffold.

The Auditor is rule-based and never calls a language model, so nothing here runs on the audit path
and DSPy is not a dependency. The scaffold names the one program an LLM-assisted extractor would
need, with the determinism contract it would have to honour (Module 06 §5.2):

* temperature 0, a fixed seed where the provider supports one;
* schema-locked JSON output: a list of ``{key, path, kind, value}`` claims that must each be found
  verbatim in the evidence item, so the claim stays grounded;
* the decoding policy recorded in ``TracePolicy.decoding_policy``;
* the provider exchange recorded as an external input and replayed from the record.

Until such a program exists :class:`ClaimExtractionProgram` reports itself unavailable and
:func:`extract_with_llm` returns no claims; :class:`~engine.auditor.AuditorAgent` works without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DECODING_POLICY", "ClaimExtractionProgram", "extract_with_llm"]

DECODING_POLICY = "temperature=0;seed=0;schema=claims_v1"
"""The decoding policy an LLM extractor would have to record (unused by the rule-based auditor)."""


@dataclass(frozen=True)
class ClaimExtractionProgram:
    """Placeholder signature: evidence text in, schema-locked claims out. Never configured."""

    name: str = "auditor.claim_extraction.v1"
    decoding_policy: str = DECODING_POLICY

    @property
    def available(self) -> bool:
        """Always False: no DSPy program ships with the deterministic auditor."""
        return False


def extract_with_llm(program: ClaimExtractionProgram, llm: Any, text: str) -> list[dict[str, Any]]:
    """No-op: returns no claims. A real program must return only claims found verbatim in ``text``."""
    del program, llm, text
    return []
