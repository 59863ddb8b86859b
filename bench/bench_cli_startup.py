"""How long ``ledger --help`` takes to answer, in a fresh interpreter each time (target: < 0.3 s).

Runs ``python -m cli --help`` ``--runs`` times (the console script does the same import) and prints
the median and the worst wall-clock time. A benchmark, not a timed test: it never fails a build.

    python bench/bench_cli_startup.py [--runs 10] [COMMAND ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 0.3


def time_once(argv: list[str]) -> float:
    """Seconds for one ``ledger ARGV`` in a new process."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cli", *argv], env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> int:
    """Measure and print."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10, help="fresh processes to time (default 10)")
    parser.add_argument("argv", nargs="*", default=["--help"], help="ledger arguments (default: --help)")
    args = parser.parse_args()
    time_once(args.argv)  # warm the file cache and the bytecode
    seconds = [time_once(args.argv) for _ in range(args.runs)]
    median = statistics.median(seconds)
    verdict = "meets" if median < TARGET_SECONDS else "misses"
    print(
        f"ledger {' '.join(args.argv)}: median {median:.3f} s, worst {max(seconds):.3f} s over {args.runs} runs "
        f"({verdict} the {TARGET_SECONDS} s target)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
