"""Regenerate the auditor golden files, deliberately.

Each ``tests/golden/auditor/NN_name.json`` is the Auditor's report on ``samples/corpus/NN_name.json``,
rendered as ``ledger audit NN_name.json --format json`` prints it: trace, verification, step hashes,
``reasoning_root``, ``evidence_root``, ``prompt_spec_hash`` and evaluation variables. The inputs are
read with the engine's models only, not the envelope's cross-field checks, so the goldens also pin
the Auditor on inputs that ``ledger audit`` and the consumer refuse (``36_duplicate_evidence_ids``).
``tests/unit/test_auditor_golden.py`` fails on any byte of difference, so any change to a step hash
is caught.

When a change to committed bytes is intended (new step content, new check, new wording), bump
``engine.version.ENGINE_VERSION`` and rewrite the goldens with either::

    .venv/bin/python -m tests.golden.regenerate            # rewrite every golden file
    .venv/bin/python -m tests.golden.regenerate --check    # only report which would change
    LEDGER_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_auditor_golden.py

then review the diff (``git diff tests/golden``) before committing it with the code change.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.audit import render_json
from engine.auditor import audit_report
from engine.jsonio import loads_strict
from engine.schemas import EvidenceBundle, PromptSpec

ROOT = Path(__file__).resolve().parents[2]
CORPUS_DIR = ROOT / "samples" / "corpus"
GOLDEN_DIR = Path(__file__).resolve().parent / "auditor"
UPDATE_ENV = "LEDGER_UPDATE_GOLDEN"

__all__ = [
    "CORPUS_DIR",
    "GOLDEN_DIR",
    "UPDATE_ENV",
    "audit_output",
    "corpus_paths",
    "golden_path",
    "regenerate",
]


def corpus_paths() -> list[Path]:
    """Every corpus bundle, in name order."""
    return sorted(CORPUS_DIR.glob("[0-9][0-9]_*.json"))


def golden_path(corpus_path: Path) -> Path:
    """Where the golden output of one corpus bundle lives."""
    return GOLDEN_DIR / corpus_path.name


def audit_output(corpus_path: Path) -> str:
    """The Auditor's report on ``corpus_path``, as ``ledger audit PATH --format json`` prints it."""
    document = loads_strict(corpus_path.read_bytes())
    prompt_spec = PromptSpec.model_validate(document["prompt_spec"])
    evidence = EvidenceBundle.model_validate(document["evidence_bundle"])
    return render_json(audit_report(prompt_spec, evidence))


def regenerate(*, check_only: bool = False) -> list[Path]:
    """Rewrite (or, with ``check_only``, just list) the golden files whose content would change."""
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    changed: list[Path] = []
    wanted = {golden_path(path) for path in corpus_paths()}
    for path in corpus_paths():
        target = golden_path(path)
        text = audit_output(path)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            changed.append(target)
            if not check_only:
                target.write_text(text, encoding="utf-8")
    for stale in sorted(GOLDEN_DIR.glob("*.json")):
        if stale not in wanted:
            changed.append(stale)
            if not check_only:
                stale.unlink()
    return changed


def main(argv: list[str] | None = None) -> int:
    """Command line: rewrite the goldens, or with ``--check`` exit 1 when any would change."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="do not write; exit 1 if any golden is out of date"
    )
    args = parser.parse_args(argv)
    changed = regenerate(check_only=args.check)
    for path in changed:
        print(("out of date: " if args.check else "rewritten: ") + str(path.relative_to(ROOT)))
    print(
        f"{len(corpus_paths())} corpus bundles, {len(changed)} golden file(s) {'differ' if args.check else 'written'}"
    )
    return 1 if (args.check and changed) else 0


if __name__ == "__main__":
    sys.exit(main())
