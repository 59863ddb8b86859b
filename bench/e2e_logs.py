"""Reading the consumers' JSON logs for ``bench/bench_end_to_end.py``: commits, CPU, batch sizes.

The consumers log one ``batch committed`` line per transaction (records, next offsets, summed audit
and append seconds, process CPU seconds) and one ``partitions assigned`` line per assignment.
"""

from __future__ import annotations

import contextlib
import json
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any


def log_events(log_dir: Path, event: str, pattern: str = "consumer*.log") -> list[dict[str, Any]]:
    """Every JSON log line with this event, from all consumer logs (or those matching ``pattern``)."""
    lines = []
    for path in sorted(log_dir.glob(pattern)):
        for text in path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                line = json.loads(text)
                if line.get("event") == event:
                    lines.append(line)
    return lines


def ts(line: dict[str, Any]) -> float:
    """A log line's time as POSIX seconds."""
    return datetime.fromisoformat(line["ts"].replace("Z", "+00:00")).timestamp()


def commit_times(log_dir: Path) -> dict[int, list[tuple[int, float]]]:
    """Per partition, ``(next_offset, commit time)`` in commit order."""
    per_partition: dict[int, list[tuple[int, float]]] = {}
    for line in log_events(log_dir, "batch committed"):
        for partition, next_offset in line["next_offsets"].items():
            per_partition.setdefault(int(partition), []).append((int(next_offset), ts(line)))
    for commits in per_partition.values():
        commits.sort()
    return per_partition


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(fraction * len(ordered)) - 1))]


def window_cpu(log_dir: Path) -> str:
    """Consumer CPU per bundle from each member's first assignment to its last commit (no start-up).

    From the ``cpu_seconds`` the consumers log with those lines; empty for a tree that does not log it.
    """
    seconds, bundles = 0.0, 0
    for path in sorted(log_dir.glob("consumer*.log")):
        assigned, committed = (
            [line for line in log_events(log_dir, event, path.name) if "cpu_seconds" in line]
            for event in ("partitions assigned", "batch committed")
        )
        if not assigned or not committed:
            continue
        seconds += float(committed[-1]["cpu_seconds"]) - float(assigned[0]["cpu_seconds"])
        bundles += sum(int(line["records"]) for line in committed)
    if not bundles:
        return ""
    return f" ({seconds * 1000 / bundles:.2f} ms/bundle from first assignment to last commit)"


def batch_summary(log_dir: Path, wall: float) -> str:
    """Batches, median and largest size (above ``--max-records``: joined), summed audit / commit s, wall."""
    lines = log_events(log_dir, "batch committed")
    if not lines:
        return "no batch committed"
    audit = sum(float(line.get("audit_seconds", 0.0)) for line in lines)
    append = sum(float(line.get("append_seconds", 0.0)) for line in lines)
    sizes = [int(line["records"]) for line in lines]
    return (
        f"{len(lines)} batches, median {statistics.median(sizes):.0f} records (largest {max(sizes)}); "
        f"audit {audit:.1f} s, append {append:.1f} s (summed over batches), wall {wall:.1f} s"
    )


def median_batch(work: Path) -> float:
    """Median records per committed batch over all phases."""
    sizes = [line["records"] for log_dir in work.iterdir() for line in log_events(log_dir, "batch committed")]
    return statistics.median(sizes) if sizes else 0.0
