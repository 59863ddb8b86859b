"""Side by side with Cournot's rule-based auditor: one process, the same bundles, CPU-seconds.

Usage::

    COURNOT_SRC=/path/to/cournot-checkout .venv/bin/python bench/bench_cournot.py \
        [--rounds 5] [--n 300] [samples/corpus/*.json]

Cournot is imported at run time from the checkout named by ``COURNOT_SRC`` (nothing of it lives in
this repository); without it the script prints that the comparison was skipped and exits 0.
Two pairs of figures, bundles per CPU-second of this process, median of ``--rounds`` rounds that
alternate the four batches so machine noise hits both sides alike:

* audit only, inputs parsed once: ``AuditorAgent.audit`` vs ``AuditorRuleBased.run``;
* parse JSON → models → audit → commitments (``audit_report``: step hashes, reasoning, evidence
  and prompt-spec commitments) vs Cournot's parse → models → audit → ``compute_reasoning_root``.

Bundles that either side rejects are listed and left out of both. The output says whether the
engine ran compiled (``make compile``) or as pure Python. On a loaded machine the ratios
are meaningful; the absolute figures less so. The last line is JSON for ``bench/run_all.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import engine.canonical  # noqa: E402
from engine.auditor import AuditorAgent, audit_report  # noqa: E402
from engine.jsonio import loads_strict  # noqa: E402
from engine.schemas import EvidenceBundle, PromptSpec  # noqa: E402


def skipped(reason: str) -> int:
    """Say why there is no comparison (a figure that cannot be measured is never invented)."""
    print(f"cournot comparison skipped: {reason}")
    print(json.dumps({"skipped": reason}))
    return 0


def _cournot(source: str) -> dict[str, Any]:
    """Cournot's auditor, context, schemas and reasoning-root function, imported from ``source``."""
    sys.path.insert(1, source)
    logging.disable(logging.CRITICAL)  # Cournot's agents log every run
    from agents import AgentContext  # type: ignore[import-not-found]
    from agents.auditor import AuditorRuleBased  # type: ignore[import-not-found]
    from core.por.proof_of_reasoning import compute_reasoning_root  # type: ignore[import-not-found]
    from core.schemas import EvidenceBundle as CournotBundle  # type: ignore[import-not-found]
    from core.schemas import PromptSpec as CournotSpec  # type: ignore[import-not-found]

    return {
        "ctx": AgentContext.create_minimal(),
        "auditor": AuditorRuleBased(),
        "root": compute_reasoning_root,
        "bundle": CournotBundle,
        "spec": CournotSpec,
    }


def main(argv: list[str] | None = None) -> int:
    """Measure both auditors on the same bundles and print medians and ratios."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=300, help="bundles per timed batch (cycled over the files)")
    parser.add_argument("files", nargs="*", help="bundle files (default: samples/corpus/*.json)")
    args = parser.parse_args(argv)
    source = os.environ.get("COURNOT_SRC", "")
    if not source:
        return skipped("COURNOT_SRC is not set")
    if not (Path(source) / "agents" / "auditor").is_dir():
        return skipped("COURNOT_SRC does not point at a Cournot checkout")
    try:
        c = _cournot(source)
    except ImportError as exc:
        return skipped(f"Cournot cannot be imported ({exc})")
    files = [Path(f) for f in args.files] or sorted((ROOT / "samples" / "corpus").glob("*.json"))
    ours = AuditorAgent()
    accepted: list[tuple[bytes, tuple[Any, Any], tuple[PromptSpec, EvidenceBundle]]] = []
    rejected: list[str] = []
    for path in files:
        raw = path.read_bytes()
        try:
            document = json.loads(raw)
            theirs = (
                c["spec"].model_validate(document["prompt_spec"]),
                c["bundle"].model_validate(document["evidence_bundle"]),
            )
            result = c["auditor"].run(c["ctx"], theirs[0], [theirs[1]])
            if not result.success:
                raise ValueError(result.error)
            mine = loads_strict(raw)
            pair = (
                PromptSpec.model_validate(mine["prompt_spec"]),
                EvidenceBundle.model_validate(mine["evidence_bundle"]),
            )
            ours.audit(*pair)
        except Exception as exc:  # a bundle either side refuses is listed and left out, never measured
            rejected.append(f"{path.name}: {type(exc).__name__}: {str(exc)[:80]}")
            continue
        accepted.append((raw, theirs, pair))
    if not accepted:
        return skipped("no bundle is accepted by both auditors")
    batch = [accepted[i % len(accepted)] for i in range(args.n)]

    def cournot_audit() -> None:
        for _, (spec, bundle), _ in batch:
            c["auditor"].run(c["ctx"], spec, [bundle])

    def project_audit() -> None:
        for _, _, (spec, bundle) in batch:
            ours.audit(spec, bundle)

    def cournot_full() -> None:
        for raw, _, _ in batch:
            document = json.loads(raw)
            spec = c["spec"].model_validate(document["prompt_spec"])
            bundle = c["bundle"].model_validate(document["evidence_bundle"])
            c["root"](c["auditor"].run(c["ctx"], spec, [bundle]).output)

    def project_full() -> None:
        for raw, _, _ in batch:
            document = loads_strict(raw)
            spec = PromptSpec.model_validate(document["prompt_spec"])
            audit_report(spec, EvidenceBundle.model_validate(document["evidence_bundle"]), agent=ours)

    batches: dict[str, Callable[[], None]] = {
        "cournot_audit": cournot_audit,
        "project_audit": project_audit,
        "cournot_full": cournot_full,
        "project_full": project_full,
    }
    rates: dict[str, list[float]] = {name: [] for name in batches}
    for run in batches.values():
        run()  # warm-up
    for _ in range(args.rounds):
        for name, run in batches.items():
            started = time.process_time()
            run()
            rates[name].append(args.n / (time.process_time() - started))
    median = {name: statistics.median(values) for name, values in rates.items()}
    compiled = Path(engine.canonical.__file__ or "").suffix in (".so", ".pyd")  # loaded from a mypyc build
    figures = {
        "engine": "compiled (mypyc)" if compiled else "pure Python",
        "bundles": len(accepted),
        "rejected": rejected,
        "rounds": args.rounds,
        "n_per_batch": args.n,
        "cournot_audit": round(median["cournot_audit"]),
        "project_audit": round(median["project_audit"]),
        "ratio_audit": round(median["project_audit"] / median["cournot_audit"], 3),
        "cournot_full": round(median["cournot_full"]),
        "project_full": round(median["project_full"]),
        "ratio_full": round(median["project_full"] / median["cournot_full"], 3),
    }
    print(
        f"bundles: {len(accepted)} accepted by both, {len(rejected)} left out; {args.rounds} rounds of {args.n};"
        f" engine: {figures['engine']}"
    )
    print(
        f"audit only          : project {figures['project_audit']:,} vs Cournot {figures['cournot_audit']:,}"
        f" bundles/CPU-s, ratio {figures['ratio_audit']}"
    )
    print(
        f"parse+audit+commits : project {figures['project_full']:,} vs Cournot {figures['cournot_full']:,}"
        f" bundles/CPU-s, ratio {figures['ratio_full']}"
    )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
