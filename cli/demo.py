"""``ledger demo``: the command, and the readable summary of what the demo found and checked."""

from __future__ import annotations

import argparse
import subprocess
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from cli.commands import command_names
from cli.exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from cli.progress import StepProgress
from consumers.publisher import SentRecord
from devstack.demo import (
    DLQ_TOPIC,
    TOPIC,
    VIEWS,
    DemoError,
    DemoRecord,
    DemoResult,
    market_of,
    run_demo,
)
from devstack.extra import EmbeddedExtraMissing, EmbeddedServiceError, require_embedded_extra
from devstack.stack import corpus_hint, psql_program
from ledger.settings import get_settings

__all__ = ["print_report", "register"]


def register(subparsers: Any) -> None:
    """Add ``demo`` to the ``ledger`` command line."""
    parser = subparsers.add_parser(
        "demo",
        description=(
            "Starts a throwaway embedded PostgreSQL (<state_dir>/demo) and broker, publishes the sample "
            "corpus (bundles plus poison records), consumes it, prints verdicts, conflicts, rejections "
            "and step counts, runs `ledger replay --all` and `ledger verify`, then stops everything. "
            "Ignores LEDGER_DATABASE_URL / LEDGER_KAFKA_BOOTSTRAP: it never touches configured services. "
            f"Exit status 0 when every check passed, {EXIT_FAILED} when one failed, "
            f"{EXIT_USAGE} when the demo could not run."
        ),
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=None,
        help="directory with manifest.json (default: the corpus shipped in the package, devstack/demo_corpus)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo and print its report."""
    require_embedded_extra()
    try:
        progress = StepProgress(prefix="ledger demo")
        result = run_demo(get_settings(), offered=command_names(), progress=progress, corpus_dir=args.corpus)
    except EmbeddedExtraMissing:
        raise  # cli.main.run prints the one line naming the extra
    except DemoError as exc:
        print(f"ledger demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except EmbeddedServiceError as exc:
        print(f"ledger demo: an embedded service failed: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print_report(sys.stdout, result)
    return EXIT_OK if result.passed else EXIT_FAILED


def _tail(text: str, lines: int = 14) -> list[str]:
    kept = [line for line in text.strip().splitlines() if line.strip()]
    return kept[-lines:]


def _tool_lines(name: str, done: subprocess.CompletedProcess[str] | None) -> list[str]:
    if done is None:
        return [f"  ledger {name}: not available in this build (no `ledger {name}` command)"]
    command = " ".join(["ledger", *map(str, done.args[3:])])  # args: python -m cli ...
    if done.returncode == 0:
        result = "identical: every step hash, root and verdict reproduced" if name == "replay" else "passed"
    else:
        result = f"FAILED (exit {done.returncode})"
    lines = [f"  {command}: {result}"]
    lines += [f"    | {line}" for line in _tail(done.stdout)]
    if done.returncode != 0:
        lines += [f"    ! {line}" for line in _tail(done.stderr)]
    return lines


def _pad(text: str, width: int) -> str:
    """Left-justify by display width (CJK characters take two columns)."""
    shown = sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)
    return text + " " * max(0, width - shown)


def _verdict_lines(records: Sequence[DemoRecord], found: dict[str, Any]) -> list[str]:
    order = {market_of(record): index for index, record in enumerate(records) if not record.raw}
    files = {market_of(record): record for record in records if not record.raw}
    rows = sorted(found["verdicts"], key=lambda row: order.get(row["market_id"], len(order)))
    lines = [f"  {'market':<38} {'outcome':<20} {'conf':>5}  {'rule':<19} {'steps':>5}  file / flags"]
    for row in rows:
        record = files.get(row["market_id"])
        flags = [
            flag
            for flag, on in (
                ("CONFLICT", row["conflict_detected"]),
                ("INSUFFICIENT", row["insufficient_evidence"]),
            )
            if on
        ]
        confidence = f"{row['confidence']:.2f}" if row["confidence"] is not None else "-"
        lines.append(
            f"  {_pad(row['market_id'] or '-', 38)} {_pad(row['outcome'] or '-', 20)} {confidence:>5}  "
            f"{row['resolution_rule_id'] or '-':<19} {row['step_count']:>5}  "
            f"{record.name if record else '?'} {' '.join(flags)}".rstrip()
        )
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    outcomes = ", ".join(f"{outcome} {count}" for outcome, count in sorted(counts.items()))
    conflicts = sum(bool(row["conflict_detected"]) for row in rows)
    insufficient = sum(bool(row["insufficient_evidence"]) for row in rows)
    lines.append(
        f"  outcomes: {outcomes}; conflicts: {conflicts}; insufficient evidence: {insufficient}; "
        f"trace steps: {found['totals']['steps']}"
    )
    return lines


def _finding_lines(records: Sequence[DemoRecord], found: dict[str, Any]) -> list[str]:
    order = [market_of(record) for record in records if not record.raw]
    by_market: dict[str, list[dict[str, Any]]] = {}
    for row in found["findings"]:
        by_market.setdefault(row["market_id"], []).append(row)
    lines = []
    for market in sorted(by_market, key=lambda m: order.index(m) if m in order else len(order)):
        rows = by_market[market]
        kind = "conflict" if rows[0]["conflict_detected"] else "insufficient evidence"
        lines.append(f"  {market} ({kind})")
        lines += [f"      {row['check_id']}: {row['message']}" for row in rows]
    return lines or ["  none"]


def _rejection_lines(
    records: Sequence[DemoRecord], sent: Sequence[SentRecord], found: dict[str, Any]
) -> list[str]:
    files = {(where.partition, where.offset): record for record, where in zip(records, sent, strict=True)}
    lines = []
    for row in found["rejections"]:
        record = files.get((row["kafka_partition"], row["kafka_offset"]))
        lines.append(
            f"  {record.name if record else '?'} (partition {row['kafka_partition']}, offset {row['kafka_offset']}): "
            f"{row['reason_code']}"
        )
        lines.append(f"      {row['message']} at {row['field_path']}")
        if record is not None:
            lines.append(f"      ({record.story})")
    return lines or ["  none"]


SQL_TO_TRY = (
    "SELECT market_id, outcome, confidence FROM ledger.verdicts ORDER BY global_seq;",
    "SELECT market_id, conflict_detected, insufficient_evidence FROM ledger.audit_results;",
    "SELECT market_id, step_id, step_type, step_hash FROM ledger.trace_steps WHERE market_id LIKE 'mk_btc%';",
    "SELECT reason_code, message, field_path, kafka_partition, kafka_offset FROM ledger.rejections;",
    "SELECT market_id, status, step_count, kafka_partition, kafka_offset FROM ledger.submissions;",
)


def print_report(out: TextIO, result: DemoResult) -> None:
    """The readable summary."""
    records, sent, found, checks = result.records, result.sent, result.found, result.checks
    totals = found["totals"]
    bundles = sum(not record.raw for record in records)
    psql, corpus = psql_program(), corpus_hint()
    lines = [
        "",
        "Cournot verification ledger: demo",
        "=================================",
        f"Published {len(sent)} records to topic {TOPIC}: {bundles} evidence bundles and "
        f"{len(sent) - bundles} poison records sent raw.",
        f"The consumer audited them into {totals['submissions']} submissions, {totals['entries']} "
        f"hash-chained entries (head #{totals['head_seq']} {totals['head_hash']}).",
        "",
        "Verdicts per market (views ledger.verdicts, ledger.audit_results, ledger.submissions)",
        *_verdict_lines(records, found),
        "",
        "Conflicts and insufficient evidence (failed checks, ledger.audit_results.checks)",
        *_finding_lines(records, found),
        "",
        f"Rejections (view ledger.rejections; copies with reason headers on topic {DLQ_TOPIC})",
        *_rejection_lines(records, sent, found),
        "",
        "Transparency log, replay and verify",
        f"  signed checkpoint #{result.checkpoint.checkpoint_id} over {result.checkpoint.tree_size} entries: "
        f"root 0x{result.checkpoint.root_hash.hex()} (key id {result.checkpoint.key_id})",
        *_tool_lines("replay", result.tools.get("replay")),
        *_tool_lines("verify", result.tools.get("verify")),
        "",
    ]
    if checks.failed:
        lines.append(f"CHECKS FAILED: {len(checks.failed)} of {len(checks.results)}")
        lines += [f"  - {text}" for text in checks.failed]
    else:
        lines.append(f"All {len(checks.results)} checks passed in {result.seconds:.1f}s.")
    lines += [
        "",
        "Query the ledger yourself. The demo's servers are stopped now; during the run it was",
        f'  {psql} "{result.psql_url}"',
        "To keep a ledger running and query it:",
        "  ledger up                       # background PostgreSQL + broker; prints its psql line",
        f"  ledger publish {corpus}/bundles/*.json && ledger publish --raw {corpus}/poison/*.json",
        "  ledger consume --until-idle 3",
        f'  {psql} "postgresql://postgres@127.0.0.1:<PORT from ledger up>/ledger"',
        "  ledger replay --all && ledger verify",
        "  ledger down",
        "Views: " + ", ".join(f"ledger.{view}" for view in VIEWS) + ". Try:",
        *(f"  {query}" for query in SQL_TO_TRY),
    ]
    out.write("\n".join(lines) + "\n")
    out.flush()
