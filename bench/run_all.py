"""Every benchmark behind one command: one summary table, the scaling tables, the machine.

Run:  .venv/bin/python bench/run_all.py [--quick] [--write-readme] [--only NAME ...]

Each ``bench/bench_*.py`` runs as its own subprocess (own embedded servers, own process), one after
the other; the key figures are taken from its ``--json`` line when it has one, else parsed from its
printed lines. A missing or failing script is reported as "not available", never fatal. Prints a
summary (figure, value, unit, target from docs/architecture.md, ratio where ≥ 1 meets the target) and the machine;
writes the full report to ``docs/benchmarks.md`` (unless ``--only`` or ``--no-docs``); with
``--write-readme`` replaces the block between ``<!-- bench:start -->`` and ``<!-- bench:end -->``
in README.md and nothing else. ``--quick`` passes smaller sizes to the slow scripts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH)]

from common import (  # noqa: E402
    BUNDLE_HEADERS,
    ROOT,
    SIZE_HEADERS,
    bundle_size_cells,
    fmt,
    json_line,
    kept_block,
    ledger_size_cells,
    load_average,
    machine_facts,
    machine_lines,
    markdown_table,
    ratio,
    replace_marked_block,
    text_table,
)

README = ROOT / "README.md"
DOCS = ROOT / "docs" / "benchmarks.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
NA = "not available"
Figures = dict[str, Any]


@dataclass
class Script:
    """One benchmark script: its file, arguments (full and ``--quick``) and figure parser."""

    name: str
    file: str
    full: list[str]
    quick: list[str]
    parse: Callable[[str], Figures]


@dataclass
class Run:
    """What one script did."""

    script: Script
    command: list[str] = field(default_factory=list)
    status: str = NA
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""
    figures: Figures = field(default_factory=dict)


from run_all_parsers import (  # noqa: E402
    parse_append,
    parse_auditor,
    parse_end_to_end,
    parse_proofs,
    parse_replay,
    parse_scaling,
)

SCRIPTS = [
    Script("auditor", "bench_auditor.py", ["--json"], ["--json", "--repetitions", "50"], parse_auditor),
    Script("cournot", "bench_cournot.py", [], ["--rounds", "3"], json_line),
    Script(
        "append",
        "bench_append.py",
        ["--appenders", "1,2"],
        ["--submissions", "1000", "--appenders", "1,2"],
        parse_append,
    ),
    Script("scaling", "bench_scaling.py", ["--json"], ["--json", "--quick"], parse_scaling),
    Script("replay", "bench_replay.py", [], ["--submissions", "2000"], parse_replay),
    Script(
        "end_to_end",
        "bench_end_to_end.py",
        [],
        ["--bundles", "1500", "--latency-seconds", "10"],
        parse_end_to_end,
    ),
    Script(
        "proofs",
        "bench_proofs.py",
        [],
        ["--entries", "100000", "--catch-up", "10000", "--samples", "300"],
        parse_proofs,
    ),
]


# --- running -------------------------------------------------------------------------------


def supported(path: Path, args: list[str]) -> list[str]:
    """``args`` without the options the script's ``--help`` does not mention (with their values)."""
    try:
        help_text = subprocess.run(
            [sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return args
    kept: list[str] = []
    skip = False
    for arg in args:
        if arg.startswith("--"):
            skip = not re.search(rf"{re.escape(arg)}\b", help_text)
        if not skip:
            kept.append(arg)
    return kept


def run_script(script: Script, quick: bool, timeout: float) -> Run:
    """Run one script in its own session; a timeout ends that session's processes only."""
    run = Run(script)
    path = BENCH / script.file
    if not path.exists():
        run.status = f"{NA} (bench/{script.file} missing)"
        return run
    run.command = [sys.executable, str(path), *supported(path, script.quick if quick else script.full)]
    print(f"== {script.file} {' '.join(run.command[2:])}", flush=True)
    started = time.perf_counter()
    process = subprocess.Popen(
        run.command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        run.stdout, run.stderr = process.communicate(timeout=timeout)
        run.status = "ok" if process.returncode == 0 else f"failed (exit {process.returncode})"
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.stdout, run.stderr = process.communicate(timeout=15)
                break
        run.status = f"timed out after {timeout:.0f} s"
    run.seconds = time.perf_counter() - started
    if run.status == "ok" or run.stdout:
        run.figures = script.parse(run.stdout or "")
    print(f"   {run.status} in {run.seconds:.0f} s", flush=True)
    if run.status != "ok":
        print("   " + "\n   ".join((run.stderr or "").strip().splitlines()[-5:]), flush=True)
    return run


# --- report --------------------------------------------------------------------------------


def summary_rows(runs: dict[str, Run]) -> list[list[str]]:
    """[figure, value, unit, target, ratio] for every figure, "not available" where missing."""

    def get(name: str, key: str) -> Any:
        run = runs.get(name)
        return None if run is None else run.figures.get(key)

    def why(name: str) -> str:
        run = runs.get(name)
        if run is None:
            return "not run"
        return NA if run.status == "ok" or run.status.startswith(NA) else f"{NA}: {run.status}"

    rows: list[list[str]] = []

    def add(name: str, label: str, value: Any, unit: str, target: str = "", r: str = "", d: int = 0) -> None:
        shown = fmt(value, d) if isinstance(value, (int, float)) else why(name)
        rows.append([label, shown, unit, target, r if isinstance(value, (int, float)) else ""])

    auditor = get("auditor", "auditor")
    add(
        "auditor",
        "Auditor alone (corpus)",
        auditor,
        "bundles/s",
        "> Cournot ≈ 20,000",
        ratio(auditor, 20_000),
    )
    add("auditor", "Auditor + commitments (corpus)", get("auditor", "commitments"), "bundles/s")
    skip = get("cournot", "skipped")
    for key, label in (("audit", "audit only"), ("full", "parse + audit + commitments")):
        name, unit = f"Cournot side by side, {label}", "× Cournot (one process)"
        if skip is not None:
            rows.append([name, f"comparison skipped: {skip}", unit, "≥ 1.0", ""])
        else:
            value = get("cournot", f"ratio_{key}")
            add("cournot", name, value, unit, "≥ 1.0", ratio(value, 1.0), 3)
    scaling = {row["items"]: row for row in get("scaling", "bundle_size") or []}
    five = scaling.get(5, {}).get("pipeline_bundles_per_s")
    add("scaling", "Pipeline run_pipeline, 5-item bundle", five, "bundles/s")
    entries, copy = get("append", "entries"), get("append", "copy")
    copy_target = f"raw COPY, same server ({fmt(copy)})" if copy else "raw COPY, same server"
    add("append", "Ledger append_batch", entries, "entries/s", copy_target, ratio(entries, copy))
    add("append", "Ledger append_batch", get("append", "submissions"), "submissions/s")
    for count, concurrent in sorted((get("append", "appenders") or {}).items()):
        label = f"Ledger append_batch, {count} appender process(es)"
        add("append", label, concurrent, "entries/s", copy_target, ratio(concurrent, copy))
    add("append", "Raw JSONB COPY, same server", copy, "rows/s", "50–80 k rows/s", ratio(copy, 50_000))
    add("append", "Raw JSONB executemany INSERT, same server", get("append", "insert"), "rows/s")
    for key, label in (("one", "1 consumer"), ("two", "2 consumers")):
        value = get("end_to_end", key)
        add("end_to_end", f"End to end, {label}", value, "bundles/s", "≥ 2,000", ratio(value, 2_000))
    rate = get("end_to_end", "rate")
    at = f" at {fmt(rate)} bundles/s" if rate else ""
    add("end_to_end", f"Commit latency p50{at}", get("end_to_end", "p50"), "ms")
    p99 = get("end_to_end", "p99")
    p99_ratio = ratio(p99, 500, True) if rate and rate >= 1_000 else "n/a: load < 1,000/s"
    add("end_to_end", f"Commit latency p99{at}", p99, "ms", "< 500 at 1,000/s", p99_ratio)
    replay = runs["replay"].figures if "replay" in runs else {}
    for key in sorted(k for k in replay if k.startswith("replay_")) or ["replay_1"]:
        value, jobs = get("replay", key), key.rsplit("_", 1)[1]
        add("replay", f"Replay, {jobs} job(s)", value, "steps/s", "≥ 20,000", ratio(value, 20_000))
    verifies = sorted({k.rsplit("_", 1)[1] for k in replay if k.startswith("verify_steps_")}) or ["1"]
    for jobs in verifies:
        value = get("replay", f"verify_steps_{jobs}")
        label = f"Verify (chains and roots, no log), {jobs} job(s)"
        add("replay", label, value, "steps/s")
        entries = get("replay", f"verify_entries_{jobs}")
        add("replay", label, entries, "entries/s", "≥ 60,000", ratio(entries, 60_000))
    for jobs in sorted({k.rsplit("_", 1)[1] for k in replay if k.startswith("verify_log_entries_")}):
        label = f"Verify with transparency log, {jobs} job(s)"
        entries = get("replay", f"verify_log_entries_{jobs}")
        add("replay", label, entries, "entries/s", "≥ 60,000", ratio(entries, 60_000))
    size = get("proofs", "size")
    at_size = f" at {fmt(size)} entries" if size else ""
    add("proofs", f"Inclusion proof p50{at_size}", get("proofs", "inclusion_p50"), "ms", d=3)
    add("proofs", f"Inclusion proof p99{at_size}", get("proofs", "inclusion_p99"), "ms", d=3)
    add("proofs", f"Consistency proof p50{at_size}", get("proofs", "consistency_p50"), "ms", d=3)
    add("proofs", "Append hook (extend_tree, 7 leaves) p50", get("proofs", "hook_p50"), "ms", d=3)
    add("proofs", "Checkpoint after 1,000 entries", get("proofs", "steady_checkpoint"), "ms", d=1)
    add("proofs", "verify_checkpoints full scan", get("proofs", "verify"), "entries/s")
    return rows


SUMMARY_HEADERS = ["Figure", "Value", "Unit", "Target (docs/architecture.md)", "Ratio"]
SUMMARY_ALIGN = "lrllr"


def scaling_tables(scaling: Figures) -> tuple[str, str]:
    """Markdown tables of cost vs bundle size and vs ledger size (empty if not measured)."""
    bundle, size = scaling.get("bundle_size", []), scaling.get("ledger_size", [])
    return (
        markdown_table(BUNDLE_HEADERS, bundle_size_cells(bundle), "r" * 11) if bundle else "",
        markdown_table(SIZE_HEADERS, ledger_size_cells(size), "r" * 8 + "l") if size else "",
    )


def server_of(runs: dict[str, Run]) -> str | None:
    """The PostgreSQL description printed by bench_append.py or bench_scaling.py."""
    for name in ("append", "scaling"):
        if name in runs and runs[name].figures.get("server"):
            return str(runs[name].figures["server"])
    return None


def latency_note(runs: dict[str, Run]) -> list[str]:
    """A caveat when the latency phase could not run at the design's 1,000 bundles/s."""
    rate = runs["end_to_end"].figures.get("rate") if "end_to_end" in runs else None
    if not rate or rate >= 1_000:
        return []
    return [
        "",
        f"Commit latency was measured at {fmt(rate)} bundles/s, half the measured two-consumer "
        "throughput (bench_end_to_end.py's default), not at the design's 1,000 bundles/s: the "
        "consumers do not reach 2,000 bundles/s here, so its p99 is not evidence for that target.",
    ]


def million_line(runs: dict[str, Run]) -> list[str]:
    """bench_proofs.py's figures as one more point on the ledger-size curve."""
    proofs = runs["proofs"].figures if "proofs" in runs else {}
    if not proofs.get("size") or proofs.get("inclusion_p50") is None:
        return []
    return [
        "",
        f"At {fmt(proofs['size'])} entries (bench_proofs.py, ledger bulk-loaded by COPY): inclusion "
        f"proof p50 {fmt(proofs['inclusion_p50'], 3)} ms, p99 {fmt(proofs.get('inclusion_p99'), 3)} ms; "
        f"consistency proof p50 {fmt(proofs.get('consistency_p50'), 3)} ms; `root_at` p50 "
        f"{fmt(proofs.get('root_p50'), 3)} ms; append hook (7 leaves) p50 {fmt(proofs.get('hook_p50'), 3)} ms.",
    ]


def docs_report(
    command: str, date: str, facts: Figures, runs: dict[str, Run], summary: str, end_load: tuple[float, ...]
) -> str:
    """The whole report for docs/benchmarks.md."""
    bundle, size = scaling_tables(runs["scaling"].figures if "scaling" in runs else {})
    parts = [
        "# Benchmarks",
        "",
        f"Generated by `{command}` on {date}. Regenerate rather than edit: this file is overwritten.",
        "Benchmarks only: no test asserts a timing (design.md §9).",
        "",
        "## Machine",
        "",
        *machine_lines(facts, server_of(runs), end_load),
        "",
        "## Summary",
        "",
        summary,
        "",
        "Ratio: value ÷ target for throughputs, target ÷ value for latencies, so ≥ 1 meets the target. "
        "The append target is the raw JSONB COPY of the same rows on the same server (bench_append.py); "
        "COPY is compared with the 50–80 k rows/s physical limit in docs/architecture.md.",
        *latency_note(runs),
        "",
        "## Cost vs bundle size",
        "",
        "`bench/bench_scaling.py`: `samples/corpus/18_quorum_met.json` widened to N evidence items "
        "(distinct ids, sources and receipts, consistent bodies, prices within a few dollars, majority "
        "quorum); `run_pipeline` timed on one bundle, then `LedgerStore.append_batch` of the consumer's "
        "drafts (`ledger.store.drafts.submission_draft`) in batches of 20 submissions, canonicalisation, "
        "hashing and tree upkeep included, fsync on.",
        "",
        bundle or f"{NA}: {runs['scaling'].status if 'scaling' in runs else 'not run'}",
        "",
        "The first entry of every submission carries the whole prompt spec and bundle, hence the "
        "payload bytes; bench_append.py's synthetic submissions are far smaller (its workload line).",
        "",
        "## Cost vs ledger size",
        "",
        "One ledger grown with 5-item submissions; at each size: 200–500 random inclusion and "
        "consistency proofs and `root_at` against the stored tree (`ledger_store.merkle_tiles` since revision 0007) (all verified afterwards), "
        "then an append window of a few thousand entries in batches of 20 submissions. Expected shape: "
        "append cost flat, proof length growing with log₂ n, proof time dominated by one indexed query.",
        "",
        size or NA,
        *million_line(runs),
        "",
        "## Commands",
        "",
    ]
    for run in runs.values():
        shown = " ".join([".venv/bin/python", f"bench/{run.script.file}", *run.command[2:]])
        parts.append(f"- `{shown}`: {run.status}, {run.seconds:.0f} s")
    parts += ["", "## Raw output", ""]
    for run in runs.values():
        if not run.stdout:
            continue
        lines = [line for line in run.stdout.splitlines() if not line.startswith("{")]
        parts += [f"### bench/{run.script.file}", "", "```text", *lines, "```", ""]
    parts += [
        "## Not measured here",
        "",
        "- Memory under a backlog of 1,000,000 bundles (docs/architecture.md): no benchmark script covers it yet.",
        "",
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Run the scripts, print the summary, write the report (and the README block if asked)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes for the slow scripts")
    parser.add_argument("--write-readme", action="store_true", help="replace the README's bench block")
    parser.add_argument("--only", nargs="+", choices=[s.name for s in SCRIPTS], help="run only these")
    parser.add_argument("--no-docs", action="store_true", help=f"do not write {DOCS.relative_to(ROOT)}")
    parser.add_argument("--timeout", type=float, help="seconds per script (default 1800, quick 900)")
    args = parser.parse_args(argv)
    command = ".venv/bin/python bench/run_all.py" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    facts = machine_facts()
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"machine: {facts['cpu']}, {facts['usable_cpus']} CPUs, load average {facts['load_average']}")
    runs: dict[str, Run] = {}
    for script in SCRIPTS:
        if args.only and script.name not in args.only:
            continue
        runs[script.name] = run_script(script, args.quick, args.timeout or (900 if args.quick else 1800))
    end_load = load_average()
    rows = summary_rows(runs)
    print()
    print("\n".join(line[2:] for line in machine_lines(facts, server_of(runs), end_load)))
    print()
    print(text_table(SUMMARY_HEADERS, rows, SUMMARY_ALIGN))
    summary = markdown_table(SUMMARY_HEADERS, rows, SUMMARY_ALIGN)
    bundle, size = scaling_tables(runs["scaling"].figures if "scaling" in runs else {})
    for title, table in (("cost vs bundle size", bundle), ("cost vs ledger size", size)):
        if table:
            print(f"\n{title}:\n{table}")
    if not (args.only or args.no_docs):
        DOCS.parent.mkdir(parents=True, exist_ok=True)
        kept = kept_block(DOCS)  # hand-written sections (before/after studies) survive regeneration
        DOCS.write_text(docs_report(command, date, facts, runs, summary, end_load) + kept)
        print(f"\nfull report written to {DOCS.relative_to(ROOT)}")
    if args.write_readme:
        machine = f"{facts['cpu']}, {facts['usable_cpus']} CPUs, {facts['python']}"
        load = " / ".join(f"{x:.2f}" for x in facts["load_average"])
        block = (
            f"Measured {date} with `{command}` on {machine} (load average {load} at start, a shared "
            f"machine). Full report, scaling tables and raw output: [docs/benchmarks.md](docs/benchmarks.md).\n\n"
            f"{summary}\n"
        )
        if replace_marked_block(README, START, END, block):
            print("README.md: benchmark block replaced")
        else:
            print(f"README.md has no {START} … {END} block: nothing written; the table is above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
