"""How cost grows with bundle size and with ledger size (a benchmark, not a timed test).

Run:  .venv/bin/python bench/bench_scaling.py [--url URL] [--quick] [--json]

Without --url an embedded PostgreSQL (fsync on, foreground, temporary directory) is started and
stopped at the end; every part gets a fresh, migrated database.

* bundle size: ``samples/corpus/18_quorum_met.json`` widened to 1, 5, 20 and 100 evidence items
  (distinct evidence ids, sources and receipts; JSON bodies, parsed values and extracted prices
  consistent and within a few dollars of each other; every item on the one requirement, every
  source allowed and targeted; ``multi_source_quorum`` with ``max_sources`` = items and a majority
  quorum, ``single_best`` for one item). Timed: ``engine.pipeline.run_pipeline`` (bundles/s, µs per
  evidence item, trace steps per bundle) and ``LedgerStore.append_batch`` of the consumer's drafts
  (``ledger.store.drafts.submission_draft``), canonicalisation, hashing and tree upkeep included.
* ledger size: one ledger grown with 5-item submissions; at ~1k, 10k and 100k entries, timed:
  ``inclusion_proof_at``, ``consistency_proof_at`` and ``root_at`` (``ledger.translog.tree``; the
  sampled proofs are verified afterwards) and an append window of ``--window`` entries (after a
  ``VACUUM (ANALYZE)`` and ``CHECKPOINT``, so the window does not pay for the growth burst).

Drafts for appends are the consumer's for one pipeline run per distinct bundle, re-sent under new
event ids (only ``event_id`` and the idempotency key differ; checked once against the full path).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import gc
import hashlib
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]

from common import (  # noqa: E402
    BUNDLE_HEADERS,
    SIZE_HEADERS,
    bundle_size_cells,
    ledger_size_cells,
    machine_facts,
    percentile,
    postgres_server,
    scratch_database,
    server_facts,
    text_table,
)

from engine.envelope import DecodedEnvelope, decode_envelope, wrap_inputs  # noqa: E402
from engine.merkle.rfc6962 import verify_consistency, verify_inclusion  # noqa: E402
from engine.pipeline import run_pipeline  # noqa: E402
from ledger.connect import create_ledger_engine  # noqa: E402
from ledger.store.append import prepare  # noqa: E402
from ledger.store.drafts import audit_envelope, submission_draft  # noqa: E402
from ledger.store.ledger_store import LedgerStore  # noqa: E402
from ledger.store.records import EntryDraft, OffsetAdvance, SubmissionDraft  # noqa: E402
from ledger.translog.leaves import entry_leaf_hash  # noqa: E402
from ledger.translog.tree import consistency_proof_at, inclusion_proof_at, root_at, tree_size  # noqa: E402

TEMPLATE = BENCH.parent / "samples" / "corpus" / "18_quorum_met.json"
PAIRS_PER_SIZE = 4  # distinct bundles per size; drafts are re-sent copies of their audits


# --- bundles ------------------------------------------------------------------------------


def _body(style: int, price: float, updated: int) -> tuple[dict[str, Any], str]:
    """A (parsed, raw) price document in the style of the template's three venues."""
    if style == 0:
        parsed: dict[str, Any] = {"bitcoin": {"usd": price, "last_updated_at": updated}}
    elif style == 1:
        parsed = {"symbol": "BTCUSDT", "price": f"{price:.8f}"}
    else:
        parsed = {"data": {"amount": f"{price:.2f}", "base": "BTC", "currency": "USD"}}
    return parsed, json.dumps(parsed, separators=(",", ":"))


def synthesize(items: int, variant: int = 0) -> dict[str, Any]:
    """The template document with ``items`` consistent evidence items on its one requirement."""
    document: dict[str, Any] = json.loads(TEMPLATE.read_text())
    spec, bundle = document["prompt_spec"], document["evidence_bundle"]
    requirement = spec["data_requirements"][0]
    templates, targets = bundle["items"], requirement["source_targets"]
    new_items, new_targets, allowed = [], [], []
    for i in range(items):
        style = i % len(templates)
        item = copy.deepcopy(templates[style])
        source = item["provenance"]["source_id"] if i < len(templates) else f"venue_{i:03d}"
        price = round(100_400.0 + ((i * 37) % 11) * 1.25 + variant * 0.01, 2)
        parsed, raw = _body(style, price, 1_769_903_970 - i)
        item["evidence_id"] = f"ev_{hashlib.sha256(f'{variant}:{i}'.encode()).hexdigest()[:16]}"
        item["provenance"].update(
            source_id=source,
            receipt_id=f"rcpt_{variant:04x}{i:012x}",
            content_hash="0x" + hashlib.sha256(raw.encode()).hexdigest(),
        )
        item.update(raw_content=raw, parsed_value=parsed, extracted_fields={"price_usd": price})
        new_items.append(item)
        new_targets.append({**targets[style], "source_id": source})
        allowed.append({"source_id": source, "kind": "api", "allow": True, "min_provenance_tier": 0})
    bundle.update(
        items=new_items,
        bundle_id=f"bundle_scaling_{items:03d}_{variant:04d}",
        total_sources_attempted=items,
        total_sources_succeeded=items,
    )
    requirement["source_targets"] = new_targets
    spec["market"]["allowed_sources"] = allowed
    policy = requirement["selection_policy"]
    if items == 1:
        policy.update(strategy="single_best", min_sources=1, max_sources=1, quorum=1)
    else:
        policy.update(min_sources=2, max_sources=items, quorum=items // 2 + 1)
    return document


def decoded(document: dict[str, Any], event_id: str) -> DecodedEnvelope:
    """The consumer's decode of the document wrapped in an envelope."""
    raw = json.dumps(wrap_inputs(document["prompt_spec"], document["evidence_bundle"], event_id=event_id))
    return decode_envelope(raw.encode())


def resent(draft: SubmissionDraft, event_id: str) -> SubmissionDraft:
    """``draft`` as the consumer would build it for the same inputs sent under ``event_id``."""
    received = draft.entries[0]
    payload = {**received.payload, "envelope": {**received.payload["envelope"], "event_id": event_id}}
    entries = [EntryDraft(received.kind, payload), *draft.entries[1:]]
    return dataclasses.replace(draft, idempotency_key=f"event:{event_id}", entries=entries)


def without_carried_text(draft: SubmissionDraft) -> SubmissionDraft:
    """``draft`` with no entry's carried canonical text, to compare what it says, not how it was built."""
    return dataclasses.replace(draft, entries=[dataclasses.replace(e, canonical=None) for e in draft.entries])


class DraftFactory:
    """Distinct submissions for one bundle size, cycling over a few audited bundles."""

    def __init__(self, items: int, tag: str) -> None:
        self.tag, self.count = tag, 0
        documents = [synthesize(items, variant) for variant in range(PAIRS_PER_SIZE)]
        self.drafts = [audit_envelope(decoded(d, f"{tag}-seed-{k}")) for k, d in enumerate(documents)]
        check = audit_envelope(decoded(documents[0], f"{tag}-check"))
        if without_carried_text(resent(self.drafts[0], f"{tag}-check")) != without_carried_text(check):
            raise SystemExit("re-sent draft differs from the consumer's own: fix resent()")

    def take(self, count: int) -> list[SubmissionDraft]:
        """``count`` new submissions."""
        out = []
        for _ in range(count):
            out.append(resent(self.drafts[self.count % len(self.drafts)], f"{self.tag}-{self.count:07d}"))
            self.count += 1
        return out


# --- measurements ------------------------------------------------------------------------


def time_pipeline(envelope: DecodedEnvelope, seconds: float, min_runs: int = 20) -> tuple[float, float]:
    """(bundles/s wall, bundles per CPU-second) of ``run_pipeline`` on one bundle, repeated."""
    spec, bundle = envelope.envelope.prompt_spec, envelope.envelope.evidence_bundle
    run_pipeline(spec, bundle)  # warm caches
    gc.collect()
    runs, started, cpu = 0, time.perf_counter(), time.process_time()
    while runs < min_runs or time.perf_counter() - started < seconds:
        run_pipeline(spec, bundle)
        runs += 1
    return runs / (time.perf_counter() - started), runs / max(1e-9, time.process_time() - cpu)


class Appender:
    """``append_batch`` through one pooled connection, advancing one partition's offset like a consumer."""

    def __init__(self, url: str) -> None:
        self.engine = create_ledger_engine(url, pool_size=1, max_overflow=0)
        self.store = LedgerStore(self.engine)
        self.offset = 0
        self.entries = 0

    def append(self, drafts: list[SubmissionDraft], batch: int) -> tuple[float, list[float]]:
        """Append in batches; (wall seconds, per-batch seconds)."""
        latencies = []
        started = time.perf_counter()
        for first in range(0, len(drafts), batch):
            chunk = drafts[first : first + batch]
            advance = OffsetAdvance("bench", "evidence-bundles", 0, self.offset, self.offset + len(chunk))
            t0 = time.perf_counter()
            results = self.store.append_batch(chunk, [advance])
            latencies.append(time.perf_counter() - t0)
            if any(r.status != "created" for r in results):
                raise SystemExit("append_batch did not create every submission")
            self.offset += len(chunk)
            self.entries += sum(len(d.entries) for d in chunk)
        return time.perf_counter() - started, latencies

    def close(self) -> None:
        """Dispose of the engine."""
        self.engine.dispose()


def bundle_size_row(
    server_url: str, items: int, seconds: float, append_entries: int, batch: int
) -> dict[str, Any]:
    """Pipeline and append figures for bundles of ``items`` evidence items."""
    envelope = decoded(synthesize(items), f"size-{items}")
    result = run_pipeline(envelope.envelope.prompt_spec, envelope.envelope.evidence_bundle)
    if result.verdict.outcome != "YES" or not result.audit_verification.ok:
        raise SystemExit(
            f"{items}-item bundle: {result.verdict.outcome}, audit ok={result.audit_verification.ok}"
        )
    rate, cpu_rate = time_pipeline(envelope, seconds)
    draft = submission_draft(envelope, result, None)
    payload_bytes = sum(len(e.payload_canonical.encode()) for e in prepare(draft).entries)
    factory = DraftFactory(items, f"s{items}")
    submissions = max(2 * batch, math.ceil(append_entries / len(draft.entries)))
    drafts = factory.take(submissions)
    with scratch_database(server_url) as url:
        appender = Appender(url)
        appender.append(factory.take(batch), batch)  # warm-up batch, not timed
        wall, latencies = appender.append(drafts, batch)
        appender.close()
    per_submission = wall / submissions
    return {
        "items": items,
        "steps": len(result.trace.steps),
        "entries": len(draft.entries),
        "payload_bytes": payload_bytes,
        "pipeline_bundles_per_s": rate,
        "pipeline_bundles_per_cpu_s": cpu_rate,
        "pipeline_us_per_bundle": 1e6 / rate,
        "pipeline_us_per_item": 1e6 / rate / items,
        "append_submissions": submissions,
        "append_batch": batch,
        "append_submissions_per_s": submissions / wall,
        "append_entries_per_s": submissions * len(draft.entries) / wall,
        "append_us_per_submission": per_submission * 1e6,
        "append_us_per_item": per_submission * 1e6 / items,
        "append_batch_p50_ms": statistics.median(latencies) * 1000,
    }


def timed_ms(samples: int, action: Any) -> list[float]:
    """Milliseconds per call of ``action(i)``."""
    out = []
    for i in range(samples):
        start = time.perf_counter()
        action(i)
        out.append((time.perf_counter() - start) * 1000)
    return out


def proof_figures(engine: Any, samples: int, rng: random.Random) -> dict[str, Any]:
    """Proof and root timings at the current tree size; the sampled proofs are verified untimed."""
    with engine.connect() as conn:
        n = tree_size(conn)
        indices = [rng.randrange(n) for _ in range(samples)]
        olds = [rng.randrange(1, n) for _ in range(samples)]
        proofs: list[list[bytes]] = []
        inclusion = timed_ms(samples, lambda i: proofs.append(inclusion_proof_at(conn, indices[i], n)))
        cproofs: list[list[bytes]] = []
        consistency = timed_ms(samples, lambda i: cproofs.append(consistency_proof_at(conn, olds[i], n)))
        roots = timed_ms(samples, lambda i: root_at(conn, n))
        root = root_at(conn, n)
        rows = conn.exec_driver_sql(
            "SELECT global_seq, entry_hash FROM ledger_store.entries WHERE global_seq = ANY(%(s)s)",
            {"s": [i + 1 for i in indices]},
        ).all()
        hashes = {int(seq) - 1: str(value) for seq, value in rows}
        ok = all(
            verify_inclusion(entry_leaf_hash(hashes[i]), i, n, p, root)
            for i, p in zip(indices, proofs, strict=True)
        )
        ok = ok and all(
            verify_consistency(o, n, root_at(conn, o), root, p)
            for o, p in list(zip(olds, cproofs, strict=True))[:20]
        )
    return {
        "tree_size": n,
        "inclusion_p50_ms": statistics.median(inclusion),
        "inclusion_p99_ms": percentile(inclusion, 0.99),
        "inclusion_hashes": statistics.fmean(len(p) for p in proofs),
        "consistency_p50_ms": statistics.median(consistency),
        "consistency_p99_ms": percentile(consistency, 0.99),
        "root_p50_ms": statistics.median(roots),
        "proofs_verify": ok,
    }


def settle(engine: Any) -> None:
    """VACUUM ANALYZE and CHECKPOINT after growth, so a window does not pay for the bulk load's aftermath."""
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.exec_driver_sql("VACUUM (ANALYZE)")
        with contextlib.suppress(Exception):  # CHECKPOINT needs a privileged role on a given server
            conn.exec_driver_sql("CHECKPOINT")


def ledger_size_rows(
    server_url: str, sizes: list[int], window: int, batch: int, samples: int
) -> list[dict[str, Any]]:
    """Grow one ledger of 5-item submissions; proofs and an append window at each size."""
    rng = random.Random(6962)
    factory = DraftFactory(5, "grow")
    per = len(factory.drafts[0].entries)
    rows = []
    with scratch_database(server_url) as url:
        appender = Appender(url)
        for target in sizes:
            missing = math.ceil(max(0, target - appender.entries) / per)
            for first in range(0, missing, 2000):  # growth: the same append path, larger batches, untimed
                appender.append(factory.take(min(2000, missing - first)), 100)
            settle(appender.engine)
            row = proof_figures(appender.engine, samples, rng)
            count = max(batch, math.ceil(window / per))
            wall, latencies = appender.append(factory.take(count), batch)
            row.update(
                append_entries=count * per,
                append_batch=batch,
                append_entries_per_s=count * per / wall,
                append_submissions_per_s=count / wall,
                append_batch_p50_ms=statistics.median(latencies) * 1000,
                append_entries_per_s_median_batch=batch * per / statistics.median(latencies),
            )
            rows.append(row)
            print(f"  ledger at {row['tree_size']:,} entries: done", file=sys.stderr, flush=True)
        appender.close()
    return rows


# --- output -------------------------------------------------------------------------------


def print_tables(bundle_rows: list[dict[str, Any]], size_rows: list[dict[str, Any]]) -> None:
    """Both scaling tables, human-readable."""
    print("\nbundle size (run_pipeline, then append_batch of the consumer's drafts):")
    print(text_table(BUNDLE_HEADERS, bundle_size_cells(bundle_rows), "r" * len(BUNDLE_HEADERS)))
    print("\nledger size (one growing ledger of 5-item submissions):")
    print(text_table(SIZE_HEADERS, ledger_size_cells(size_rows), "r" * len(SIZE_HEADERS)))


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run both parts, print the tables (and one JSON line with ``--json``)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="PostgreSQL server URL (default: embedded, fsync on)")
    parser.add_argument("--quick", action="store_true", help="shorter timings and smaller windows")
    parser.add_argument("--items", type=int, nargs="+", default=[1, 5, 20, 100])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--seconds", type=float, help="pipeline timing per bundle size (default 3, quick 1)")
    parser.add_argument("--append-entries", type=int, help="entries appended per bundle size")
    parser.add_argument("--batch", type=int, default=20, help="submissions per append_batch when timed")
    parser.add_argument(
        "--window", type=int, help="entries appended at each ledger size (default 3000, quick 1500)"
    )
    parser.add_argument("--samples", type=int, help="proofs per kind and size (default 500, quick 200)")
    parser.add_argument("--json", action="store_true", help="also print every figure as one JSON line")
    args = parser.parse_args(argv)
    seconds = args.seconds or (1.0 if args.quick else 3.0)
    append_entries = args.append_entries or (4_000 if args.quick else 12_000)
    window = args.window or (1_500 if args.quick else 3_000)
    samples = args.samples or (200 if args.quick else 500)
    machine = machine_facts()
    with postgres_server(args.url) as server_url:
        facts = server_facts(server_url)
        print(f"machine: {machine['cpu']}, {machine['usable_cpus']} CPUs, {machine['python']}; {facts}")
        print(f"load average at start: {' '.join(str(x) for x in machine['load_average'])}")
        bundle_rows = []
        for items in args.items:
            bundle_rows.append(bundle_size_row(server_url, items, seconds, append_entries, args.batch))
            print(f"  {items}-item bundles: done", file=sys.stderr, flush=True)
        size_rows = ledger_size_rows(server_url, sorted(args.sizes), window, args.batch, samples)
    print_tables(bundle_rows, size_rows)
    if args.json:
        print(
            json.dumps(
                {"machine": machine, "server": facts, "bundle_size": bundle_rows, "ledger_size": size_rows}
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
