"""PoR pack verification throughput: packs verified per second by ``engine.por_pack``.

Run:  .venv/bin/python bench/bench_por.py [--seconds 5] [--pack tests/data/por_packs/genuine/quorum_met]

The pack's files are read once; the timed loop is the pure verifier (strict JSON decoding, model
validation, manifest hashes, the five roots, witnesses and verdict checks) on the in-memory bytes,
single-threaded. Also timed: one mutated pack (``steps_reordered``), whose failures build
challenges with Merkle proofs. Prints packs/s and the median per-pack latency for each.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engine.por_pack import verify_pack_files  # noqa: E402
from ledger.por_files import read_pack_files  # noqa: E402

DEFAULT_PACK = ROOT / "tests" / "data" / "por_packs" / "genuine" / "quorum_met"
MUTATED_PACK = ROOT / "tests" / "data" / "por_packs" / "mutated" / "steps_reordered"


def measure(path: Path, seconds: float) -> tuple[float, float, str]:
    """(packs/s, median ms per pack, status) over ``seconds`` of back-to-back verification."""
    files = read_pack_files(path)
    status = verify_pack_files(files, source=path.name).status  # warm-up
    timings: list[float] = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        verify_pack_files(files, source=path.name)
        timings.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    return len(timings) / elapsed, statistics.median(timings) * 1000, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--pack", type=Path, default=DEFAULT_PACK)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, single thread")
    for path in (args.pack, MUTATED_PACK):
        rate, median, status = measure(path, args.seconds)
        print(f"{path.name:<20} status={status:<7} {rate:8.1f} packs/s   median {median:.2f} ms/pack")


if __name__ == "__main__":
    main()
