"""Auditor throughput on the checked-in corpus (a benchmark, not a timed test).

Usage::

    .venv/bin/python bench/bench_auditor.py [--repetitions N] [--corpus DIR]

Inputs are parsed once (pydantic validation is not timed); then every bundle of
``samples/corpus`` is audited ``N`` times round-robin, single-threaded. Each line gives wall-clock
bundles/s and bundles per CPU-second of this process (steadier on a shared machine). Two figures:

* ``auditor``: ``AuditorAgent.audit`` alone (claims, checks, selection, trace, trace-policy
  verification), the figure comparable with Cournot's rule-based auditor (≈ 20,000 bundles/s on
  the same kind of bundles, design.md §9), with the ratio to it;
* ``auditor+commitments``: the same plus every step hash, ``reasoning_root``, ``evidence_root``
  and ``prompt_spec_hash`` (what ``ledger audit`` computes).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.auditor import AuditorAgent, audit_report  # noqa: E402
from engine.jsonio import loads_strict  # noqa: E402
from engine.schemas import EvidenceBundle, PromptSpec  # noqa: E402

COURNOT_REFERENCE = 20_000.0


def load_corpus(directory: Path) -> list[tuple[PromptSpec, EvidenceBundle]]:
    """Parse every ``NN_name.json`` of the corpus."""
    pairs = []
    for path in sorted(directory.glob("*.json")):
        document = loads_strict(path.read_bytes())
        pairs.append(
            (
                PromptSpec.model_validate(document["prompt_spec"]),
                EvidenceBundle.model_validate(document["evidence_bundle"]),
            )
        )
    return pairs


def measure(
    label: str, work: object, pairs: list[tuple[PromptSpec, EvidenceBundle]], repetitions: int
) -> float:
    """Run ``work(prompt_spec, bundle)`` over the corpus ``repetitions`` times; returns bundles/s."""
    assert callable(work)
    for prompt_spec, bundle in pairs:  # warm caches (compiled patterns, parsed phrases)
        work(prompt_spec, bundle)
    gc.collect()
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(repetitions):
        for prompt_spec, bundle in pairs:
            work(prompt_spec, bundle)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    count = repetitions * len(pairs)
    rate, cpu_rate = count / elapsed, count / cpu
    print(
        f"{label}: {rate:,.0f} bundles/s (corpus of {len(pairs)}, {repetitions} repetitions, {elapsed:.2f} s wall; "
        f"{cpu_rate:,.0f} bundles per CPU-second) = {rate / COURNOT_REFERENCE:.2f}x Cournot's rule-based "
        "auditor ≈ 20,000 bundles/s"
    )
    return rate


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and print both figures as text (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repetitions", type=int, default=200)
    parser.add_argument("--corpus", type=Path, default=ROOT / "samples" / "corpus")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = parser.parse_args(argv)
    pairs = load_corpus(args.corpus)
    agent = AuditorAgent()
    audit_rate = measure("auditor", agent.audit, pairs, args.repetitions)
    full_rate = measure(
        "auditor+commitments",
        lambda p, b: audit_report(p, b, agent=agent),
        pairs,
        max(1, args.repetitions // 2),
    )
    if args.json:
        figures = {
            "auditor_bundles_per_s": round(audit_rate),
            "with_commitments_bundles_per_s": round(full_rate),
        }
        print(json.dumps({**figures, "corpus": len(pairs), "reference_bundles_per_s": COURNOT_REFERENCE}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
