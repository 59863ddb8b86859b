"""What ``ledger verify`` reports: :class:`Problem` (the checks over stored bytes are in
:mod:`ledger.verify.canonical_form`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from engine.sentinel import Challenge

__all__ = ["Problem"]


@dataclass(frozen=True)
class Problem:
    """One broken item: a machine ``code``, a message, where it is, and the challenge if any."""

    code: str
    message: str
    severity: Literal["error", "warning"] = "error"
    source: Literal["ledger", "translog"] = "ledger"
    submission_id: str | None = None
    market_id: str | None = None
    global_seq: int | None = None
    stream_seq: int | None = None
    entry_kind: str | None = None
    step_index: int | None = None
    step_id: str | None = None
    leaf_index: int | None = None
    details: dict[str, Any] = field(default_factory=dict)
    challenge: Challenge | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form: None fields dropped, the challenge as its packet."""
        out = {k: v for k, v in self.__dict__.items() if v is not None and k != "challenge"}
        if not self.details:
            out.pop("details", None)
        out["challenge"] = None if self.challenge is None else self.challenge.model_dump(mode="json")
        return out
