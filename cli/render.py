"""Text rendering of replay and verify reports: a summary table and every finding."""

from __future__ import annotations

from ledger.replay.runner import ReplayReport, SubmissionReplay
from ledger.verify.problems import Problem
from ledger.verify.runner import VerifyReport

__all__ = ["render_replay", "render_verify"]

_STATUS_LABELS = {
    "identical": "identical",
    "diverged": "diverged",
    "version_drift": "version drift",
    "error": "error",
}


def _short(value: str | None, keep: int = 18) -> str:
    if value is None:
        return "-"
    return value if len(value) <= keep + 1 else value[:keep] + "…"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _result_lines(item: SubmissionReplay) -> list[str]:
    head = f"{item.status.upper():<13} {item.submission_id}  market {item.market_id or '-'}"
    lines = [head]
    if item.status == "version_drift":
        lines.append(f"    recorded engine {item.recorded_engine_version}, replayed with the current engine")
    if item.error:
        lines.append(f"    {item.error}")
    if item.differing:
        lines.append(f"    differing: {', '.join(item.differing)}")
    first = item.first
    if first is not None:
        where = first.component
        if first.step_index is not None:
            where = f"step {first.step_index} ({first.step_id}), {first.component}"
        elif first.root_field:
            where = f"{first.component}.{first.root_field}"
        lines.append(f"    first difference: {where}")
        if first.diff:
            lines.append(_indent(first.diff, "      "))
    for reasoning in item.reasoning:
        if reasoning.status != "identical":
            lines.append(
                f"    reasoning.verified #{reasoning.global_seq}: {reasoning.status} {reasoning.note}".rstrip()
            )
            lines.extend(f"      {line}" for line in reasoning.diff[:20])
    return lines


def render_replay(report: ReplayReport) -> str:
    """The replay summary table, then each non-identical submission with its first difference."""
    summary = report.summary()
    lines = [
        f"ledger replay: {report.submissions:,} submission(s), {report.steps:,} steps in "
        f"{summary['elapsed_seconds']:.2f}s ({summary['steps_per_second']:,.0f} steps/s, {report.jobs} job(s)), "
        f"engine {report.engine_version}",
        "",
        f"  {'status':<16}{'submissions':>12}{'steps':>12}",
    ]
    for status, label in _STATUS_LABELS.items():
        lines.append(f"  {label:<16}{report.counts[status]:>12,}{report.steps_by_status[status]:>12,}")
    reasoning = {k: v for k, v in report.reasoning_counts.items() if v}
    if reasoning:
        lines.append(
            "  reasoning entries: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in reasoning.items())
        )
    lines.append("")
    for item in report.results:
        lines.extend(_result_lines(item))
    if report.results_left_out:
        lines.append(f"... {report.results_left_out} more non-identical submission(s) not listed")
    lines.extend(f"note: {note}" for note in report.notes)
    if report.recorded is not None:
        recorded = ", ".join(f"{k} {v}" for k, v in report.recorded.items() if k != "kind")
        lines.append(f"recorded replay.verified entries: {recorded}")
    verdict = "OK" if report.ok else "DIVERGED"
    lines.append(
        f"result: {verdict}, {summary['identical_percent']}% identical (results_root {summary['results_root']})"
    )
    return "\n".join(lines)


def _problem_line(problem: Problem) -> list[str]:
    where = []
    if problem.submission_id:
        where.append(f"submission {problem.submission_id}")
    if problem.step_index is not None:
        where.append(f"step {problem.step_index}" + (f" ({problem.step_id})" if problem.step_id else ""))
    if problem.global_seq is not None:
        where.append(f"global_seq {problem.global_seq}")
    lines = [f"{problem.severity.upper():<7} {problem.code}: {problem.message}"]
    if where:
        lines.append("        " + ", ".join(where))
    challenge = problem.challenge
    if challenge is not None:
        proof = challenge.merkle_proof
        leaf = "" if challenge.leaf_index is None else f" leaf {challenge.leaf_index}"
        tree = (
            ""
            if proof is None
            else f", proof in the {proof.tree} tree (root {_short(proof.root)}, {proof.leaf_count} leaves)"
        )
        lines.append(f"        challenge {challenge.kind} {challenge.challenge_id}{leaf}{tree}")
    return lines


def render_verify(report: VerifyReport) -> str:
    """Every problem, then a table of counts per code and the verdict."""
    summary = report.summary()
    lines = [
        f"ledger verify: {report.submissions:,} submissions, {report.entries:,} entries, {report.steps:,} steps "
        f"in {summary['elapsed_seconds']:.2f}s ({summary['entries_per_second']:,.0f} entries/s)"
        + ("" if report.translog_checked else ", transparency log not checked"),
        "",
    ]
    for problem in report.problems:
        lines.extend(_problem_line(problem))
    if report.counts:
        lines.extend(["", f"  {'severity:code':<44}{'count':>8}"])
        lines.extend(f"  {key:<44}{count:>8,}" for key, count in sorted(report.counts.items()))
    lines.append("")
    result = "OK" if report.ok else "FAILED"
    lines.append(f"result: {result} ({report.errors} error(s), {report.warnings} warning(s))")
    return "\n".join(lines)
