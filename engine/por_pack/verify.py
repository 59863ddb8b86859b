"""Verify a Cournot PoR pack: manifest, market ids, consistency, the five roots, the verdict copies.

Entry points take what the shell read: :func:`verify_pack_files` (``{path in pack: bytes}`` from a
directory or zip) and :func:`verify_pack_document` (one JSON object keyed by part). Nothing here
touches the file system. Every check is reported, never only the first failure; the pack is
``ok`` only when no check failed and none was unverifiable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from engine.canonical import canonical_bytes, hash_canonical, to_hex
from engine.por_pack.models import PackCheck, PackReport, PackStatus, PipelineReasoningTrace
from engine.por_pack.parts import REQUIRED_PARTS, PackParts, parts_from_document, parts_from_files
from engine.por_pack.roots import RootChecker
from engine.por_pack.witness import simplified_evidence_root, simplified_reasoning_root
from engine.schemas import DeterministicVerdict, EvidenceBundle, PoRBundle, PromptSpec, ToolPlan

__all__ = ["FORMAT_PREFIX", "verify_pack_document", "verify_pack_files", "verify_parts"]

FORMAT_PREFIX = "pack"
FORMAT_MAX = 1


def _ok(check_id: str, ok: bool, message: str, **fields: Any) -> PackCheck:
    return PackCheck.model_validate(
        {"check_id": check_id, "status": "ok" if ok else "failed", "message": message, **fields}
    )


def _format_ok(version: str) -> bool:
    prefix, _, number = version.rpartition(".v")
    return prefix == FORMAT_PREFIX and number.isdigit() and int(number) <= FORMAT_MAX


def _manifest_checks(parts: PackParts) -> list[PackCheck]:
    manifest = parts.manifest
    if manifest is None:
        return []
    checks = [
        _ok(
            "manifest.format_version",
            _format_ok(manifest.format_version),
            f"format_version {manifest.format_version!r}"
            + ("" if _format_ok(manifest.format_version) else " is not pack.v1"),
            file="manifest.json",
        )
    ]
    missing = [key for key in REQUIRED_PARTS if key not in manifest.files]
    checks.append(
        _ok(
            "manifest.required_files",
            not missing,
            "all required files listed" if not missing else f"manifest does not list {missing}",
            file="manifest.json",
            details={"missing": missing},
        )
    )
    for key, entry in manifest.files.items():
        data = parts.files.get(entry.path)
        if data is None:
            checks.append(_ok(f"file.{key}", False, f"{entry.path} is listed but absent", file=entry.path))
            continue
        digest = hashlib.sha256(data).hexdigest()
        good = digest == entry.sha256.lower() and len(data) == entry.bytes
        checks.append(
            _ok(
                f"file.{key}",
                good,
                f"{entry.path} " + ("matches the manifest" if good else "does not match its manifest entry"),
                file=entry.path,
                expected=entry.sha256,
                actual=digest,
                details={"expected_bytes": entry.bytes, "actual_bytes": len(data)},
            )
        )
    uncommitted = sorted(entry.path for key, entry in manifest.files.items() if key not in parts.paths)
    if uncommitted:
        checks.append(
            PackCheck(
                check_id="file.uncommitted",
                status="warn",
                file=uncommitted[0],
                message=f"covered only by the unsigned manifest, by no root: {uncommitted}",
                details={"files": uncommitted},
            )
        )
    listed = {entry.path for entry in manifest.files.values()} | {"manifest.json"}
    for path in sorted(set(parts.files) - listed):
        checks.append(
            PackCheck(
                check_id="file.unlisted",
                status="warn",
                file=path,
                message=f"{path} is in the pack but not in the manifest (not verified)",
            )
        )
    return checks


def _market_checks(parts: PackParts) -> list[PackCheck]:
    ids: dict[str, str] = {}
    prompt = parts.model("prompt_spec", PromptSpec)
    if prompt is not None:
        ids[parts.paths["prompt_spec"]] = prompt.market.market_id
    for key, kind in (
        ("evidence_bundle", EvidenceBundle),
        ("reasoning_trace", PipelineReasoningTrace),
        ("verdict", DeterministicVerdict),
        ("por_bundle", PoRBundle),
    ):
        model = parts.model(key, kind)
        if model is not None:
            ids[parts.paths[key]] = model.market_id
    if parts.manifest is not None and parts.files:
        ids["manifest.json"] = parts.manifest.market_id
    reference = ids.get(parts.paths["prompt_spec"]) or next(iter(ids.values()), None)
    checks = []
    for path, market_id in ids.items():
        checks.append(
            _ok(
                "market_id",
                market_id == reference,
                f"{path} market_id {market_id!r}"
                + ("" if market_id == reference else f" differs from {reference!r}"),
                file=path,
                expected=reference,
                actual=market_id,
            )
        )
    return checks


def _consistency_checks(parts: PackParts) -> list[PackCheck]:
    checks: list[PackCheck] = []
    evidence = parts.model("evidence_bundle", EvidenceBundle)
    trace = parts.model("reasoning_trace", PipelineReasoningTrace)
    plan = parts.model("tool_plan", ToolPlan)
    if evidence is not None and trace is not None:
        checks.append(
            _ok(
                "consistency.bundle_id",
                trace.bundle_id == evidence.bundle_id,
                "trace.bundle_id "
                + ("names" if trace.bundle_id == evidence.bundle_id else "does not name")
                + " the evidence bundle",
                file=parts.paths["reasoning_trace"],
                expected=evidence.bundle_id,
                actual=trace.bundle_id,
            )
        )
    if evidence is not None and plan is not None:
        checks.append(
            _ok(
                "consistency.plan_id",
                plan.plan_id == evidence.plan_id,
                "tool_plan.plan_id "
                + ("names" if plan.plan_id == evidence.plan_id else "does not name")
                + " the evidence bundle's plan",
                file=parts.paths["tool_plan"],
                expected=evidence.plan_id,
                actual=plan.plan_id,
            )
        )
    if evidence is not None:
        duplicates = evidence.duplicate_evidence_ids()
        if duplicates:
            checks.append(
                PackCheck(
                    check_id="consistency.duplicate_evidence_ids",
                    status="warn",
                    file=parts.paths["evidence_bundle"],
                    evidence_id=duplicates[0],
                    message=f"evidence ids occur more than once: {duplicates}",
                )
            )
    return checks


def _verdict_checks(parts: PackParts, checker: RootChecker | None) -> list[PackCheck]:
    checks: list[PackCheck] = []
    verdict = parts.model("verdict", DeterministicVerdict)
    por = parts.model("por_bundle", PoRBundle)
    path = parts.paths["verdict"]
    if verdict is not None and por is not None:
        same = canonical_bytes(verdict) == canonical_bytes(por.verdict)
        differing = sorted(
            k for k in type(verdict).model_fields if getattr(verdict, k) != getattr(por.verdict, k)
        )
        checks.append(
            _ok(
                "verdict.embedded",
                same,
                "por_bundle.verdict equals verdict.json"
                if same
                else f"por_bundle.verdict differs from verdict.json in {differing}",
                file=path,
                expected=to_hex(hash_canonical(por.verdict)),
                actual=to_hex(hash_canonical(verdict)),
                details={"fields": differing},
            )
        )
    if verdict is None or checker is None:
        return checks
    simplified = {
        "prompt_spec_hash": to_hex(hash_canonical(checker.prompt.model_copy(update={"created_at": None}))),
        "evidence_root": simplified_evidence_root(checker.evidence),
        "reasoning_root": simplified_reasoning_root(checker.trace.steps),
    }
    for name, value in simplified.items():
        written = getattr(verdict, name)
        checks.append(
            _ok(
                f"verdict_refs.{name}",
                written == value,
                f"verdict.{name} (Cournot's simplified hash) "
                + ("matches" if written == value else "differs"),
                file=path,
                expected=value,
                actual=written,
            )
        )
    if verdict.evidence_root != simplified["evidence_root"]:
        position = next(i for i, c in enumerate(checks) if c.check_id == "verdict_refs.evidence_root")
        checks[position] = _dropped_ids(checks[position], checker, verdict)
    justification = verdict.metadata.get("justification")
    if isinstance(justification, str):
        checks.extend(_justification_header(justification, verdict, checker.prompt, path))
        value = "0x" + hashlib.sha256(justification.encode("utf-8")).hexdigest()
        checks.append(
            _ok(
                "verdict_refs.justification_hash",
                verdict.justification_hash == value,
                "justification_hash "
                + ("is" if verdict.justification_hash == value else "is not")
                + " the sha256 of metadata.justification",
                file=path,
                expected=value,
                actual=verdict.justification_hash,
            )
        )
    cited = set(checker.trace.cited_evidence_ids())
    refs = verdict.selected_leaf_refs
    good = set(refs) == cited and len(refs) == len(cited)
    checks.append(
        _ok(
            "verdict_refs.selected_leaf_refs",
            good,
            "selected_leaf_refs are the evidence ids the trace cites"
            if good
            else "selected_leaf_refs are not the set of cited evidence ids",
            file=path,
            details={"missing": sorted(cited - set(refs)), "extra": sorted(set(refs) - cited)},
        )
    )
    return checks


def _dropped_ids(check: PackCheck, checker: RootChecker, verdict: DeterministicVerdict) -> PackCheck:
    """If adding back the cited-but-absent ids reproduces verdict.evidence_root, name them."""
    present = [item.evidence_id for item in checker.evidence.items]
    missing = [i for i in checker.trace.cited_evidence_ids() if i not in present]
    if not missing:
        return check
    joined = "|".join(sorted([*present, *missing]))
    if "0x" + hashlib.sha256(joined.encode("utf-8")).hexdigest() != verdict.evidence_root:
        return check
    return check.model_copy(
        update={
            "message": f"verdict.evidence_root is reproduced only with {missing} added back: they were removed",
            "evidence_id": missing[0],
            "details": {"removed": missing},
        }
    )


def _justification_header(
    text: str, verdict: DeterministicVerdict, prompt: PromptSpec, path: str
) -> list[PackCheck]:
    """The judge's justification starts with the market, outcome, confidence and rule it decided."""
    expected = {
        "Market": prompt.market.question,
        "Outcome": verdict.outcome,
        "Confidence": f"{verdict.confidence:.0%}",
        "Rule Applied": verdict.resolution_rule_id,
    }
    written = dict(line.split(": ", 1) for line in text.split("\n")[:4] if ": " in line)
    differing = [key for key, value in expected.items() if written.get(key) != value]
    first = differing[0] if differing else None
    return [
        _ok(
            "verdict_refs.justification_header",
            not differing,
            "the justification states the verdict's market, outcome, confidence and rule"
            if not differing
            else f"the justification disagrees with the verdict on {differing}",
            file=path,
            expected=written.get(first) if first else None,
            actual=expected[first] if first else None,
            details={"fields": differing},
        )
    ]


def _status(checks: list[PackCheck]) -> PackStatus:
    if any(check.status == "failed" for check in checks):
        return "failed"
    if any(check.status == "unverifiable" for check in checks):
        return "unverifiable"
    return "ok"


def verify_parts(parts: PackParts) -> PackReport:
    """Run every check on parsed parts and build the report."""
    checks = [*parts.checks, *_manifest_checks(parts), *_market_checks(parts), *_consistency_checks(parts)]
    models = (
        parts.model("prompt_spec", PromptSpec),
        parts.model("evidence_bundle", EvidenceBundle),
        parts.model("reasoning_trace", PipelineReasoningTrace),
        parts.model("verdict", DeterministicVerdict),
        parts.model("por_bundle", PoRBundle),
    )
    checker = None
    if all(model is not None for model in models):
        checker = RootChecker(*models, paths=parts.paths)
        checker.run()
        checks.extend(checker.checks)
    else:
        checks.append(
            PackCheck(
                check_id="roots",
                status="failed",
                message="roots not recomputed: a required part is missing or invalid",
            )
        )
    checks.extend(_verdict_checks(parts, checker))
    por = parts.model("por_bundle", PoRBundle)
    if por is not None and parts.manifest is not None and parts.files:
        same = parts.manifest.por_root == (por.por_root or "")
        checks.append(
            _ok(
                "manifest.por_root",
                same,
                "manifest por_root " + ("equals" if same else "differs from") + " por_bundle.por_root",
                file="manifest.json",
                expected=por.por_root,
                actual=parts.manifest.por_root,
            )
        )
    return PackReport(
        source=parts.source,
        status=_status(checks),
        market_id=por.market_id if por is not None else None,
        por_root=por.por_root if por is not None else None,
        checks=checks,
        challenges=checker.challenges if checker is not None else [],
    )


def verify_pack_files(files: Mapping[str, bytes], *, source: str) -> PackReport:
    """Verify a pack given as ``{path inside the pack: bytes}``."""
    return verify_parts(parts_from_files(files, source=source))


def verify_pack_document(document: Any, *, source: str) -> PackReport:
    """Verify a pack given as one decoded JSON object keyed by part."""
    return verify_parts(parts_from_document(document, source=source))
