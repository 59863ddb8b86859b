"""Cournot's set-order-dependent ``verdict_hash``, and how a verifier settles it.

Cournot's judge writes two values in ``set`` iteration order, which depends on the hash seed of the
process that built the verdict: ``selected_leaf_refs`` (``list(set(cited evidence ids))``) and the
source list in the auditor's evidence summary, which the judge copies into
``metadata.justification`` (whose sha256 is ``justification_hash``). The rule applied here:

1. hash the verdict as written; if it equals the claim, the check passes (``order="as_written"``);
2. otherwise, if those fields hold at least two entries, try every order of the cited ids and of
   the sources (rewriting ``justification_hash`` with the text when it matched before) and pass
   with a warning naming the order that reproduces the claim;
3. if no order reproduces it, the check fails, listing how many orders were tried;
4. if there are more than ``MAX_ORDERINGS`` orders to try, the result is ``unverifiable``, never ok.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.canonical import hash_canonical, sha256_hex, to_hex
from engine.schemas import DeterministicVerdict

__all__ = ["MAX_ORDERINGS", "OrderSearch", "settle_verdict_hash"]

MAX_ORDERINGS = 40320  # 8! orders: a few hundred milliseconds at most
_SOURCES = re.compile(r"(from sources: )(.*?)(\. Provenance tiers)")


@dataclass(frozen=True)
class OrderSearch:
    """How the claimed verdict hash was (or was not) reproduced."""

    status: Literal["ok", "warn", "failed", "unverifiable"]
    recomputed: str
    details: dict[str, Any] = field(default_factory=dict)


def _sources(justification: object) -> tuple[list[str], re.Match[str] | None]:
    if not isinstance(justification, str):
        return [], None
    match = _SOURCES.search(justification)
    if match is None:
        return [], None
    return match.group(2).split(", "), match


def settle_verdict_hash(verdict: DeterministicVerdict, claimed: str) -> OrderSearch:
    """Apply the module's rule to ``verdict`` and the ``claimed`` hash."""
    as_written = to_hex(hash_canonical(verdict))
    refs = list(verdict.selected_leaf_refs)
    justification = verdict.metadata.get("justification")
    sources, match = _sources(justification)
    dependent = len(refs) >= 2 or len(sources) >= 2
    base = {"order_dependent": dependent, "selected_leaf_refs": refs, "sources": sources}
    if as_written == claimed.lower():
        return OrderSearch("ok", as_written, {**base, "order": "as_written"})
    if not dependent:
        return OrderSearch("failed", as_written, {**base, "orders_tried": 1})
    total = math.factorial(len(refs)) * math.factorial(len(sources))
    if total > MAX_ORDERINGS:
        return OrderSearch(
            "unverifiable", as_written, {**base, "orders_needed": total, "limit": MAX_ORDERINGS}
        )
    rehash = isinstance(justification, str) and verdict.justification_hash == sha256_hex(
        justification.encode("utf-8")
    )
    source_orders: list[tuple[str, ...]] = list(itertools.permutations(sources)) if match else [()]
    for source_order in source_orders:
        metadata = dict(verdict.metadata)
        update: dict[str, Any] = {}
        if match is not None and isinstance(justification, str):
            text = justification[: match.start(2)] + ", ".join(source_order) + justification[match.end(2) :]
            metadata["justification"] = text
            update = {"metadata": metadata}
            if rehash:
                update["justification_hash"] = sha256_hex(text.encode("utf-8"))
        for ref_order in itertools.permutations(refs):
            candidate = verdict.model_copy(update={**update, "selected_leaf_refs": list(ref_order)})
            if to_hex(hash_canonical(candidate)) == claimed.lower():
                return OrderSearch(
                    "warn",
                    as_written,
                    {
                        **base,
                        "order": "reordered",
                        "reproducing_selected_leaf_refs": list(ref_order),
                        "reproducing_sources": list(source_order),
                        "orders_tried": total,
                    },
                )
    return OrderSearch("failed", as_written, {**base, "orders_tried": total})
