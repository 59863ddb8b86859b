"""How ``bench/run_all.py`` reads each bench script's output: one parser per script.

Each returns the script's key figures (None where a figure is missing); the ``--json`` line is
preferred where a script prints one, else its printed lines are matched.
"""

from __future__ import annotations

import re
from typing import Any

from common import N, json_line, number

Figures = dict[str, Any]


def parse_auditor(out: str) -> Figures:
    """bench_auditor.py: its ``--json`` line, else its two printed lines."""
    data = json_line(out)
    return {
        "auditor": data.get("auditor_bundles_per_s") or number(rf"^auditor: {N} bundles/s", out),
        "commitments": data.get("with_commitments_bundles_per_s")
        or number(rf"auditor\+commitments: {N} bundles/s", out),
    }


def parse_append(out: str) -> Figures:
    """bench_append.py: ledger and reference lines."""
    server = re.search(r"server: (PostgreSQL [^\n]+)", out)
    return {
        "entries": number(rf"ledger append\s+{N} entries/s", out),
        "submissions": number(rf"{N} submissions/s", out),
        "steps": number(rf"submissions/s, {N} steps/s", out),
        "batch_p99": number(rf"batch p50 [\d.]+ ms, p99 {N} ms", out),
        "copy": number(rf"reference COPY\s+{N} rows/s", out),
        "insert": number(rf"reference INSERT\s+{N} rows/s", out),
        "workload": (m.group(1) if (m := re.search(r"workload: ([^\n]+)", out)) else ""),
        "server": server.group(1) if server else None,
        "appenders": {
            int(m.group(1)): float(m.group(2).replace(",", ""))
            for m in re.finditer(
                rf"^(\d+) appender process\(es\): [\d,]+ submissions/s, {N} entries/s", out, re.M
            )
        },
    }


def parse_end_to_end(out: str) -> Figures:
    """bench_end_to_end.py: throughput lines and the latency line."""
    return {
        "one": number(rf"1 consumer\s*:\s*{N} bundles/s", out),
        "two": number(rf"2 consumers\s*:\s*{N} bundles/s", out),
        "rate": number(rf"latency at {N} bundles/s", out),
        "p50": number(rf"latency at .*?p50 {N} ms", out),
        "p99": number(rf"latency at .*?p99 {N} ms", out),
    }


def parse_replay(out: str) -> Figures:
    """bench_replay.py: replay and verify lines, keyed by job count (both of its output styles)."""
    figures: Figures = {}
    for line in out.splitlines():
        jobs_match = re.search(r"(?:--jobs |jobs=)(\d+)", line)
        jobs = jobs_match.group(1) if jobs_match else "1"
        steps = number(rf"-> {N} steps/s", line) or number(rf"{N} steps/s", line)
        entries = number(rf"{N} entries/s", line)
        if line.startswith("replay") and steps:
            figures[f"replay_{jobs}"] = steps
        elif line.startswith("verify") and (steps or entries):
            kind = "verify" if re.search(r"no[- ]translog", line) else "verify_log"
            figures[f"{kind}_steps_{jobs}"] = steps
            figures[f"{kind}_entries_{jobs}"] = entries
    return figures


def parse_proofs(out: str) -> Figures:
    """bench_proofs.py: one line per measurement (mean, p50, p99)."""

    def p50(label: str) -> float | None:
        return number(rf"{label}[^\n]*?p50\s+{N} ms", out)

    return {
        "size": number(rf"inclusion_proof_at \(size {N}\)", out),
        "inclusion_p50": p50(r"inclusion_proof_at"),
        "inclusion_p99": number(rf"inclusion_proof_at[^\n]*?p99\s+{N} ms", out),
        "consistency_p50": p50(r"consistency_proof_at"),
        "root_p50": p50(r"root_at"),
        "hook_p50": p50(r"append hook"),
        "steady_checkpoint": number(rf"steady checkpoint[^\n]*: {N} ms", out),
        "catch_up": number(rf"catch_up_tree:.*= {N} leaves/s", out),
        "verify": number(rf"verify_checkpoints[^\n]*= {N} entries/s", out),
    }


def parse_scaling(out: str) -> Figures:
    """bench_scaling.py: its ``--json`` line."""
    return json_line(out)
