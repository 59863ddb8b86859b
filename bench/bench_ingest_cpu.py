"""CPU per bundle of the consumer's in-process stages: decode, audit, draft, prepare (a benchmark).

Run:  .venv/bin/python bench/bench_ingest_cpu.py [--bundles 1500] [--rounds 5]

The records are the end-to-end bench's (``samples/corpus`` bundles with 2–5 evidence items, each
copy given a unique ``bundle_id``), encoded before any clock starts. Each round runs every record
through the four stages one after the other, as the consumer does (``audit_envelope``), and adds each stage's
``time.process_time`` to its total; a warm-up round of 100 records runs first. The figure per
stage is the median over rounds of µs per bundle. Only this process's CPU is counted, so the
figures are steadier than wall time on a shared machine; the load average is printed beside them.
The rounds run under the consumer's collector settings (``ledger.collection``) unless
``--gc default`` asks for CPython's.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_end_to_end import corpus, records  # noqa: E402

from engine.envelope import decode_envelope  # noqa: E402
from engine.pipeline import run_pipeline  # noqa: E402
from ledger.collection import tuned_gc  # noqa: E402
from ledger.store.append import prepare  # noqa: E402
from ledger.store.drafts import submission_draft  # noqa: E402

STAGES = ("decode", "audit", "draft", "prepare")
# As the consumer's audit_envelope does; a tree from before the decoder kept the bytes has no such argument.
CARRIES_SPEC = "prompt_spec_canonical" in inspect.signature(run_pipeline).parameters
CARRIES_ITEMS = "evidence_items_canonical" in inspect.signature(run_pipeline).parameters


def one_round(values: list[bytes]) -> dict[str, float]:
    """Seconds of process CPU per stage over ``values``."""
    totals = dict.fromkeys(STAGES, 0.0)
    clock = time.process_time
    for value in values:
        t0 = clock()
        decoded = decode_envelope(value)
        t1 = clock()
        envelope = decoded.envelope
        carried: dict[str, Any] = (
            {"prompt_spec_canonical": decoded.prompt_spec_canonical} if CARRIES_SPEC else {}
        )
        if CARRIES_ITEMS:
            carried["evidence_items_canonical"] = decoded.evidence_items_canonical
        result = run_pipeline(envelope.prompt_spec, envelope.evidence_bundle, **carried)
        t2 = clock()
        draft = submission_draft(decoded, result, None)
        t3 = clock()
        prepare(draft)
        t4 = clock()
        totals["decode"] += t1 - t0
        totals["audit"] += t2 - t1
        totals["draft"] += t3 - t2
        totals["prepare"] += t4 - t3
    return totals


def main() -> None:
    """Print µs per bundle for each stage and their sum."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundles", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--gc", choices=("consumer", "default"), default="consumer", help="collector settings"
    )
    args = parser.parse_args()
    templates, source = corpus()
    values = [record.value for record in records(templates, args.bundles, "cpu")]
    one_round(values[:100])
    load_before = os.getloadavg()[0]
    rounds = []
    with tuned_gc() if args.gc == "consumer" else contextlib.nullcontext():
        for _ in range(args.rounds):
            gc.collect()
            rounds.append(one_round(values))
    load_after = os.getloadavg()[0]
    per_bundle = {stage: statistics.median(r[stage] for r in rounds) * 1e6 / len(values) for stage in STAGES}
    print(f"bundles: {source}; {len(values)} records x {args.rounds} rounds (median); collector: {args.gc}")
    print(f"load average (1 min): {load_before:.2f} -> {load_after:.2f}")
    for stage in STAGES:
        print(f"  {stage:8s} {per_bundle[stage]:7.1f} us/bundle")
    print(f"  {'total':8s} {sum(per_bundle.values()):7.1f} us/bundle")


if __name__ == "__main__":
    main()
