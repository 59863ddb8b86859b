"""Replay ``reasoning.verified`` entries through the reasoning stage's own replay function.

``ledger.reasoning.stage.replay_reasoning_entry`` re-runs the verifier over the entry's recorded
provider exchanges (:class:`engine.reasoning.RecordedProviders`, no network) and compares result
hashes; with ``live=True`` the recorded vendors are asked again, with keys from the environment
(LLM answers may legitimately change, so a live difference says the providers changed, not the
engine). When the stage is not installed, entries are skipped with a note.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from engine.reasoning import ProviderError, build_providers_from_env

__all__ = ["ReasoningReplay", "reasoning_stage", "replay_reasoning"]

ReasoningStatus = Literal["identical", "diverged", "version_drift", "not_applicable", "skipped", "error"]
REASONING_STATUSES: tuple[ReasoningStatus, ...] = (
    "identical",
    "diverged",
    "version_drift",
    "not_applicable",
    "skipped",
    "error",
)


@dataclass(frozen=True)
class ReasoningReplay:
    """The replay of one ``reasoning.verified`` entry; ``diff`` lines say what differs."""

    global_seq: int
    status: ReasoningStatus
    note: str = ""
    diff: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """Diverged or could not be replayed."""
        return self.status in ("diverged", "error")

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        out: dict[str, Any] = {"global_seq": self.global_seq, "status": self.status}
        if self.note:
            out["note"] = self.note
        if self.diff:
            out["diff"] = list(self.diff)
        return out


def reasoning_stage() -> ModuleType | None:
    """``ledger.reasoning.stage`` when installed, else None."""
    try:
        return importlib.import_module("ledger.reasoning.stage")
    except ImportError:
        return None


def _live_providers(payload: dict[str, Any]) -> list[Any]:
    result = payload.get("result")
    providers = result.get("providers") if isinstance(result, dict) else None
    vendors = [
        item["identity"]["vendor"]
        for item in providers or []
        if isinstance(item, dict) and isinstance(item.get("identity"), dict)
    ]
    if not vendors:
        raise ValueError("the recorded result names no providers to ask")
    return build_providers_from_env(vendors)


def replay_reasoning(global_seq: int, payload_text: str | None, *, live: bool = False) -> ReasoningReplay:
    """Replay one entry; never raises for a bad payload (the problem is the outcome, and so is a
    NULL text: a column whose NOT NULL was dropped by a tamperer)."""
    stage = reasoning_stage()
    if stage is None:
        return ReasoningReplay(global_seq, "skipped", "ledger.reasoning.stage is not installed")
    if payload_text is None:
        return ReasoningReplay(global_seq, "error", "payload text is NULL")
    try:
        payload = json.loads(payload_text)
    except ValueError as exc:
        return ReasoningReplay(global_seq, "error", f"payload is not JSON: {exc}")
    if not isinstance(payload, dict):
        return ReasoningReplay(global_seq, "error", "payload is not an object")
    if payload.get("status") == "not_applicable" and "result" not in payload:
        return ReasoningReplay(global_seq, "not_applicable", str(payload.get("reason_code") or ""))
    try:
        providers = _live_providers(payload) if live else None
    except (ProviderError, ValueError) as exc:
        return ReasoningReplay(global_seq, "error", f"cannot build live providers: {exc}")
    try:
        outcome = stage.replay_reasoning_entry(payload, providers=providers)
    except Exception as exc:  # a provider or verifier failure is reported, never fatal to the run
        return ReasoningReplay(global_seq, "error", f"{type(exc).__name__}: {exc}")
    diff = tuple(str(line) for line in outcome.diff)
    if outcome.identical:
        return ReasoningReplay(global_seq, "identical")
    drift = [line for line in diff if line.startswith("version drift")]
    if drift:
        return ReasoningReplay(global_seq, "version_drift", drift[0], diff)
    note = (
        "live providers answered differently" if live else "recorded exchanges replay to a different result"
    )
    return ReasoningReplay(global_seq, "diverged", note, diff)
