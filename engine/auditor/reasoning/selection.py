"""Reconcile several sources for one requirement under its ``SelectionPolicy``.

* ``single_best``: the first candidate in tie-breaker order.
* ``fallback_chain``: the first ``source_targets`` entry (in declared order) that has a usable
  candidate; if none has, the first other candidate in tie-breaker order. Anything but the first
  target is a fallback.
* ``multi_source_quorum``: the first candidate of each source, in tie-breaker order, up to
  ``max_sources``; candidates are grouped by what they say about the event, and the largest group
  must hold at least ``quorum`` distinct sources and be the only group of that size.

Tie-breakers order candidates, always ending with bundle order: ``highest_provenance`` (tier
descending), ``source_priority`` (``source_targets`` order, then ``preferred_sources``), and
``most_recent`` (observation time descending; items without a time last, then tier).
Every strategy first requires ``min_sources`` distinct usable sources.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar, Final

from engine.auditor.reasoning.claim_extraction import Claim
from engine.auditor.reasoning.values import epoch_micros
from engine.auditor.record import Record
from engine.schemas import DataRequirement, SelectionPolicy

__all__ = ["Candidate", "Selection", "order_candidates", "select"]

# Imported model classes as ``Final`` names: a compiled build reads them from C statics, not
# from the module dict at each use (they are defined in interpreted modules).
_SELECTION_POLICY: Final = SelectionPolicy

DEFAULT_POLICY = SelectionPolicy(strategy="single_best")


class Candidate(Record):
    """A usable evidence item of a requirement with the claim that carries its value."""

    FIELDS: ClassVar[tuple[str, ...]] = ("index", "evidence_id", "source_id", "tier", "claim", "observed_at")
    __slots__ = FIELDS

    def __init__(
        self,
        index: int,
        evidence_id: str,
        source_id: str,
        tier: int,
        claim: Claim,
        observed_at: datetime | None,
    ) -> None:
        self.index: Final = index
        self.evidence_id: Final = evidence_id
        self.source_id: Final = source_id
        self.tier: Final = tier
        self.claim: Final = claim
        self.observed_at: Final = observed_at


class Selection(Record):
    """The result of applying a selection policy; ``failure`` is None when a value was selected."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "requirement_id",
        "policy",
        "ordered",
        "selected",
        "groups",
        "fallback_used",
        "failure",
        "message",
        "chain",
    )
    __slots__ = FIELDS

    def __init__(
        self,
        requirement_id: str,
        policy: SelectionPolicy,
        ordered: tuple[Candidate, ...],
        selected: tuple[Candidate, ...] = (),
        groups: tuple[tuple[Any, tuple[Candidate, ...]], ...] = (),
        fallback_used: bool = False,
        failure: str | None = None,
        message: str = "",
        chain: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.requirement_id: Final = requirement_id
        self.policy: Final = policy
        self.ordered: Final = ordered
        self.selected: Final = selected
        self.groups: Final = groups
        self.fallback_used: Final = fallback_used
        self.failure: Final = failure
        self.message: Final = message
        self.chain: Final = chain

    @property
    def ok(self) -> bool:
        """True when a representative value was selected."""
        return self.failure is None and bool(self.selected)

    @property
    def representative(self) -> Candidate | None:
        """The candidate whose value stands for the requirement (first selected)."""
        return self.selected[0] if self.selected else None

    @property
    def disagreement(self) -> bool:
        """True when the considered candidates say different things about the event."""
        return len(self.groups) > 1

    def selected_ids(self) -> list[str]:
        """Selected evidence ids in bundle order."""
        selected = self.selected
        if len(selected) == 1:
            return [selected[0].evidence_id]  # one candidate is in bundle order
        return [candidate.evidence_id for candidate in sorted(selected, key=lambda c: c.index)]

    def to_output(self) -> dict[str, Any]:
        """The selection as committed inside an aggregate step."""
        representative = self.representative
        output: dict[str, Any] = {
            "disagreement": self.disagreement,
            "failure": self.failure,
            "fallback_used": self.fallback_used,
            "groups": [
                {
                    "agrees_on": key,
                    "evidence_ids": [member.evidence_id for member in members],
                    "source_ids": list({member.source_id: None for member in members}),
                }
                for key, members in self.groups
            ],
            "ok": self.ok,
            "representative": representative.evidence_id if representative else None,
            "requirement_id": self.requirement_id,
            "selected": self.selected_ids(),
            "value": representative.claim.value if representative else None,
            "value_claim_id": representative.claim.claim_id if representative else None,
        }
        if self.policy.strategy == "fallback_chain":
            output["chain"] = [{"source_id": source, "status": status} for source, status in self.chain]
        return output


def _priorities(requirement: DataRequirement | None) -> dict[str, int]:
    if requirement is None:
        return {}
    names = [target.source_id for target in requirement.source_targets] + list(requirement.preferred_sources)
    return {name: position for position, name in enumerate(dict.fromkeys(names))}


def order_candidates(
    candidates: Sequence[Candidate], tie_breaker: str, requirement: DataRequirement | None
) -> list[Candidate]:
    """Candidates in tie-breaker order (always ending with bundle order)."""
    if len(candidates) <= 1 and tie_breaker != "most_recent":
        return list(candidates)  # nothing to order (the keys of the other tie-breakers cannot fail)
    if tie_breaker == "source_priority":
        priority = _priorities(requirement)
        return sorted(candidates, key=lambda c: (priority.get(c.source_id, len(priority)), -c.tier, c.index))
    if tie_breaker == "most_recent":

        def recency(c: Candidate) -> tuple[int, int, int, int]:
            if c.observed_at is None:
                return (1, 0, -c.tier, c.index)
            return (0, -epoch_micros(c.observed_at), -c.tier, c.index)

        return sorted(candidates, key=recency)
    return sorted(candidates, key=lambda c: (-c.tier, c.index))


def _group(
    candidates: Sequence[Candidate], key_of: Callable[[Candidate], Any]
) -> list[tuple[Any, list[Candidate]]]:
    groups: list[tuple[Any, list[Candidate]]] = []
    for candidate in candidates:
        key = key_of(candidate)
        for group_key, members in groups:
            if type(group_key) is type(key) and group_key == key:
                members.append(candidate)
                break
        else:
            groups.append((key, [candidate]))
    return groups


def _sources(members: Sequence[Candidate]) -> int:
    return len({member.source_id for member in members})


def _frozen(groups: list[tuple[Any, list[Candidate]]]) -> tuple[tuple[Any, tuple[Candidate, ...]], ...]:
    return tuple((key, tuple(members)) for key, members in groups)


def select(
    requirement_id: str,
    policy: SelectionPolicy | None,
    requirement: DataRequirement | None,
    candidates: Sequence[Candidate],
    key_of: Callable[[Candidate], Any],
) -> Selection:
    """Apply ``policy`` to ``candidates``; ``key_of`` says what a candidate states about the event."""
    policy = policy or DEFAULT_POLICY
    if type(policy) is _SELECTION_POLICY:
        fields = policy.__dict__  # an exact policy's field dict: one read instead of one per field
        tie_breaker, min_sources, strategy = fields["tie_breaker"], fields["min_sources"], fields["strategy"]
    else:
        tie_breaker, min_sources, strategy = policy.tie_breaker, policy.min_sources, policy.strategy
    ordered = tuple(order_candidates(candidates, tie_breaker, requirement))
    if not ordered:
        message = "no usable evidence for this requirement"
        return Selection(requirement_id, policy, ordered, failure="no_candidates", message=message)
    if _sources(ordered) < min_sources:
        message = f"{_sources(ordered)} usable source(s), min_sources is {min_sources}"
        groups = _frozen(_group(ordered, key_of))
        return Selection(
            requirement_id, policy, ordered, groups=groups, failure="min_sources", message=message
        )
    if strategy == "multi_source_quorum":
        return _quorum(requirement_id, policy, ordered, key_of)
    groups = _frozen(_group(ordered, key_of))
    if strategy == "fallback_chain":
        return _fallback(requirement_id, policy, ordered, requirement, groups)
    message = f"selected {ordered[0].evidence_id}"
    return Selection(requirement_id, policy, ordered, selected=(ordered[0],), groups=groups, message=message)


def _fallback(
    requirement_id: str,
    policy: SelectionPolicy,
    ordered: tuple[Candidate, ...],
    requirement: DataRequirement | None,
    groups: tuple[tuple[Any, tuple[Candidate, ...]], ...],
) -> Selection:
    targets = list(dict.fromkeys(t.source_id for t in requirement.source_targets)) if requirement else []
    chain: list[tuple[str, str]] = []
    chosen: Candidate | None = None
    for source in targets:
        if chosen is not None:
            chain.append((source, "not_needed"))
            continue
        match = next((c for c in ordered if c.source_id == source), None)
        chain.append((source, "selected" if match else "unavailable"))
        chosen = match
    fallback_used = chosen is None or chosen.source_id != (targets[0] if targets else None)
    if chosen is None:
        chosen = ordered[0]
        chain.append((chosen.source_id, "selected_outside_chain"))
    message = f"selected {chosen.evidence_id}" + (" (fallback)" if fallback_used else "")
    return Selection(
        requirement_id,
        policy,
        ordered,
        selected=(chosen,),
        groups=groups,
        fallback_used=fallback_used,
        chain=tuple(chain),
        message=message,
    )


def _quorum(
    requirement_id: str,
    policy: SelectionPolicy,
    ordered: tuple[Candidate, ...],
    key_of: Callable[[Candidate], Any],
) -> Selection:
    considered: list[Candidate] = []
    seen: set[str] = set()
    max_sources = policy.max_sources
    for candidate in ordered:
        if candidate.source_id not in seen and len(considered) < max_sources:
            seen.add(candidate.source_id)
            considered.append(candidate)
    groups = _group(considered, key_of)
    sizes = [_sources(members) for _, members in groups]
    best = max(sizes)
    frozen = _frozen(groups)
    quorum = policy.quorum
    if best < quorum:
        message = f"quorum not met: at most {best} of {len(considered)} sources agree, quorum is {quorum}"
        return Selection(
            requirement_id, policy, ordered, groups=frozen, failure="quorum_not_met", message=message
        )
    if sizes.count(best) > 1:
        message = f"no consensus: {sizes.count(best)} groups of {best} sources disagree"
        return Selection(
            requirement_id, policy, ordered, groups=frozen, failure="no_consensus", message=message
        )
    members = groups[sizes.index(best)][1]
    message = f"quorum met: {best} of {len(considered)} sources agree (quorum {quorum})"
    return Selection(requirement_id, policy, ordered, selected=tuple(members), groups=frozen, message=message)
