"""Replay and verify throughput over a ledger of a few thousand submissions (a benchmark, not a test).

Usage::

    .venv/bin/python bench/bench_replay.py [--submissions 3000] [--database-url URL] [--jobs 1 2]
        [--reuse] [--skip-replay] [--repeat N] [--breakdown N]

Builds the ledger from ``samples/corpus``: each valid bundle is copied with a distinct
``bundle_id`` and event id, audited through the consumer's code path (envelope decode →
``run_pipeline`` → submission draft) and appended in batches of 500. Without ``--database-url`` an
embedded PostgreSQL is started in a temporary directory (fsync off) and removed afterwards.

Then, timed (wall clock and CPU seconds of this process; worker CPU is not in the latter):

* ``replay``: :func:`ledger.replay.runner.run_replay` over every submission, once per ``--jobs`` value;
  figures are replayed steps/s and submissions/s (every submission runs the whole pipeline: there
  is no cache); with ``--breakdown N``, the CPU per submission of each phase of replay's fast path
  (parse, decode, pipeline, draft: the three compared entries, compare) over the first N submissions;
* ``verify``: :func:`ledger.verify.runner.run_verify` without the transparency log, once per ``--jobs``
  value, then with it after a tree catch-up (``ledger checkpoint`` needs a key; the tree is
  extended unsigned here), once per ``--jobs`` value too: verified entries/s and steps/s. With
  ``--repeat N`` each verify runs N times and the fastest run is printed (a shared machine's load
  only slows runs down). ``--skip-replay`` measures verify alone.

The machine's load average is printed before and after: on a shared machine the wall-clock
figures fall with it, the per-CPU-second figures (jobs 1 only: workers' CPU is elsewhere) much less.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.envelope import EnvelopeError, decode_envelope, wrap_inputs  # noqa: E402
from ledger.connect import create_ledger_engine  # noqa: E402
from ledger.migration import upgrade  # noqa: E402
from ledger.replay.runner import run_replay  # noqa: E402
from ledger.replay.source import ReplaySelection  # noqa: E402
from ledger.store.drafts import audit_envelope  # noqa: E402
from ledger.store.ledger_store import LedgerStore  # noqa: E402
from ledger.store.records import SubmissionDraft  # noqa: E402
from ledger.verify.runner import run_verify  # noqa: E402


def corpus(directory: Path) -> list[dict[str, Any]]:
    """The corpus documents the consumer accepts."""
    documents = []
    for path in sorted(directory.glob("*.json")):
        document = json.loads(path.read_bytes())
        try:
            decode_envelope(
                json.dumps(wrap_inputs(document["prompt_spec"], document["evidence_bundle"])).encode()
            )
        except EnvelopeError:
            continue  # the corpus holds deliberately bad bundles too
        documents.append(document)
    return documents


def drafts(documents: list[dict[str, Any]], count: int) -> list[SubmissionDraft]:
    """``count`` audited drafts, round-robin over the corpus with distinct bundle ids."""
    out = []
    for index in range(count):
        source = documents[index % len(documents)]
        bundle = {
            **source["evidence_bundle"],
            "bundle_id": f"{source['evidence_bundle']['bundle_id']}_{index:06d}",
        }
        raw = json.dumps(wrap_inputs(source["prompt_spec"], bundle, event_id=f"bench-{index:06d}")).encode()
        out.append(audit_envelope(decode_envelope(raw)))
    return out


def build(url: str, count: int, corpus_dir: Path) -> tuple[int, float]:
    """Append ``count`` submissions; returns (steps, seconds spent auditing and appending)."""
    upgrade(url)
    started = time.perf_counter()
    built = drafts(corpus(corpus_dir), count)
    with LedgerStore(url) as store:
        for first in range(0, len(built), 500):
            store.append_batch(built[first : first + 500])
    return sum(len(d.steps) for d in built), time.perf_counter() - started


def timed(work: Any) -> tuple[Any, float]:
    """Run ``work()``; returns its result and the CPU seconds this process spent."""
    cpu = time.process_time()
    result = work()
    return result, time.process_time() - cpu


def fastest(repeat: int, work: Any) -> tuple[Any, float]:
    """``timed(work)`` ``repeat`` times; the report of the run with the shortest wall clock and its CPU."""
    runs = [timed(work) for _ in range(max(1, repeat))]
    return min(runs, key=lambda run: float(run[0].elapsed_seconds))


def figures(label: str, summary: dict[str, Any], cpu: float, in_process: bool) -> None:
    """One result line: wall-clock rates, and per CPU-second of this process when it did the work
    (``in_process``: one job; its read-ahead thread is in this process too)."""
    wall = summary["elapsed_seconds"]
    line = f"{label}: {summary['submissions']:,} submissions, {summary['steps']:,} steps"
    rates = f"{summary['steps'] / wall:,.0f} steps/s, {summary['submissions'] / wall:,.0f} submissions/s"
    if "entries" in summary:
        line += f", {summary['entries']:,} entries"
        rates = f"{summary['entries'] / wall:,.0f} entries/s, {rates}"
    if in_process:  # CPU time says what a free core would do, whatever the machine's load
        rates += f"; {summary['steps'] / cpu:,.0f} steps per CPU-second of this process"
        if "entries" in summary:
            rates += f" ({summary['entries'] / cpu:,.0f} entries)"
    print(f"{line} in {wall:.2f}s -> {rates}")


def breakdown(engine: Any, count: int) -> None:
    """CPU per submission of each phase of replay's fast path, over the first ``count`` submissions
    (the phases :func:`ledger.replay.runner._identical_fast` runs, timed one by one)."""
    import orjson

    from engine.envelope_inputs import decode_stored_inputs
    from ledger.replay.compare import whole_run_identical
    from ledger.replay.runner import _pipeline
    from ledger.replay.source import iter_replay_pages
    from ledger.store.drafts import payload_entries
    from ledger.store.read import snapshot

    with snapshot(engine) as conn:
        cases = [case for page in iter_replay_pages(conn, ReplaySelection(), count) for case in page][:count]
    spent = dict.fromkeys(("parse", "decode", "pipeline", "draft", "compare"), 0)
    for case in cases:
        assert case.received is not None and case.audit is not None and case.verdict is not None
        texts = {
            "submission.received": case.received,
            "audit.completed": case.audit,
            "verdict.issued": case.verdict,
        }
        start = time.process_time_ns()
        raw = case.received if isinstance(case.received, bytes) else case.received.encode("utf-8")
        received = orjson.loads(raw)
        parsed = time.process_time_ns()
        decoded = decode_stored_inputs(received, raw)
        validated = time.process_time_ns()
        result = _pipeline(decoded)
        ran = time.process_time_ns()
        entries = payload_entries(decoded, result)
        drafted = time.process_time_ns()
        assert whole_run_identical(texts, case.step_hashes, case.step_texts, result, entries)
        compared = time.process_time_ns()
        for phase, nanoseconds in zip(
            spent,
            (parsed - start, validated - parsed, ran - validated, drafted - ran, compared - drafted),
            strict=True,
        ):
            spent[phase] += nanoseconds
    total = sum(spent.values())
    print(
        f"replay fast path, CPU per submission over {len(cases):,} submissions: {total / len(cases) / 1000:.0f} us = "
        + ", ".join(
            f"{phase} {ns / len(cases) / 1000:.0f} us ({100 * ns / total:.0f}%)"
            for phase, ns in spent.items()
        )
    )


def bench(url: str, args: argparse.Namespace) -> None:
    """Build (unless --reuse) and measure."""
    engine = create_ledger_engine(url)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if not args.reuse:
        steps, seconds = build(url, args.submissions, ROOT / "samples" / "corpus")
        print(f"built {args.submissions:,} submissions, {steps:,} steps in {seconds:.1f}s")
    for jobs in [] if args.skip_replay else args.jobs:
        report, cpu = timed(lambda j=jobs: run_replay(engine, ReplaySelection(), jobs=j))
        assert report.ok, report.summary()
        figures(
            f"replay --jobs {jobs} ({report.summary()['identical_percent']}% identical)",
            report.summary(),
            cpu,
            jobs == 1,
        )
    if args.breakdown:
        breakdown(engine, args.breakdown)
    for jobs in args.jobs:
        verified, cpu = fastest(args.repeat, lambda j=jobs: run_verify(engine, translog=False, jobs=j))
        assert verified.ok, verified.summary()
        figures(f"verify --no-translog --jobs {jobs}", verified.summary(), cpu, jobs == 1)
    from ledger.translog.tree import catch_up_tree

    with engine.begin() as connection:
        catch_up_tree(connection)
    for jobs in args.jobs:
        verified, cpu = fastest(args.repeat, lambda j=jobs: run_verify(engine, jobs=j))
        assert verified.errors == 0, verified.summary()
        figures(f"verify with translog --jobs {jobs}", verified.summary(), cpu, jobs == 1)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    engine.dispose()


def main() -> None:
    """Parse arguments, provide a database, run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=3000)
    parser.add_argument(
        "--database-url", default=None, help="an empty, migratable database (default: embedded)"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="the database already holds the ledger: measure only"
    )
    parser.add_argument(
        "--jobs", type=int, nargs="+", default=[1, 2], help="replay and verify worker counts to measure"
    )
    parser.add_argument("--skip-replay", action="store_true", help="measure verify only")
    parser.add_argument(
        "--repeat", type=int, default=1, help="verify runs per figure (the fastest is printed)"
    )
    parser.add_argument(
        "--breakdown",
        type=int,
        default=0,
        metavar="N",
        help="also time each phase of replay's fast path over the first N submissions",
    )
    args = parser.parse_args()
    if args.database_url:
        bench(args.database_url, args)
        return
    from devstack.postgres import EmbeddedPostgres

    data_dir = Path(tempfile.mkdtemp(prefix="bench-replay-pg-"))
    server = EmbeddedPostgres(data_dir / "data", durable=False)
    try:
        server.start()
        bench(server.url, args)
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
