"""Turn what a pack holds (file bytes, or one JSON document) into parsed parts, recording every error.

Parsing never stops at the first problem: each part is decoded with strict JSON and validated on
its own, and a part that fails is reported as ``parse.<key>`` while the others are still checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from engine.jsonio import StrictJSONError, loads_strict
from engine.por_pack.models import PackCheck, PackManifest, PipelineReasoningTrace
from engine.schemas import DeterministicVerdict, EvidenceBundle, PoRBundle, PromptSpec, ToolPlan

__all__ = [
    "DEFAULT_PATHS",
    "PART_MODELS",
    "REQUIRED_PARTS",
    "PackParts",
    "parts_from_document",
    "parts_from_files",
]

MANIFEST_PATH = "manifest.json"
MAX_INTEGER_DIGITS = 308
"""Integer literals in a pack file are bounded so every verifier step can turn them into a 64-bit
float (the same bound the ledger's store limits apply); ``1e400`` and ``1e-400`` are refused too."""
DEFAULT_PATHS: dict[str, str] = {
    "prompt_spec": "prompt_spec.json",
    "tool_plan": "tool_plan.json",
    "evidence_bundle": "evidence_bundle.json",
    "reasoning_trace": "reasoning_trace.json",
    "verdict": "verdict.json",
    "por_bundle": "por_bundle.json",
}
REQUIRED_PARTS = ("prompt_spec", "evidence_bundle", "reasoning_trace", "verdict", "por_bundle")
PART_MODELS: dict[str, type[BaseModel]] = {
    "prompt_spec": PromptSpec,
    "tool_plan": ToolPlan,
    "evidence_bundle": EvidenceBundle,
    "reasoning_trace": PipelineReasoningTrace,
    "verdict": DeterministicVerdict,
    "por_bundle": PoRBundle,
}


@dataclass
class PackParts:
    """The pack after parsing: raw files (if any), the manifest, each part's model, and parse checks."""

    source: str
    files: dict[str, bytes] = field(default_factory=dict)
    manifest: PackManifest | None = None
    paths: dict[str, str] = field(default_factory=dict)
    models: dict[str, BaseModel] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    checks: list[PackCheck] = field(default_factory=list)

    def model(self, key: str, kind: type[Any]) -> Any:
        """The parsed model for ``key`` if it parsed as ``kind``, else None."""
        value = self.models.get(key)
        return value if isinstance(value, kind) else None


def _validation_message(exc: ValidationError) -> tuple[str, list[dict[str, Any]]]:
    errors = [
        {"loc": ".".join(str(part) for part in err["loc"]), "msg": err["msg"]} for err in exc.errors()[:20]
    ]
    first = errors[0] if errors else {"loc": "", "msg": str(exc)}
    return f"{exc.error_count()} validation error(s); first at {first['loc'] or '$'}: {first['msg']}", errors


def _parse_part(parts: PackParts, key: str, value: Any) -> None:
    path = parts.paths.get(key, DEFAULT_PATHS.get(key))
    parts.raw[key] = value
    try:
        parts.models[key] = PART_MODELS[key].model_validate(value)
    except ValidationError as exc:
        message, errors = _validation_message(exc)
        parts.checks.append(
            PackCheck(
                check_id=f"parse.{key}",
                status="failed",
                message=f"{path} is not a valid {PART_MODELS[key].__name__}: {message}",
                file=path,
                details={"errors": errors},
            )
        )


def _decode(parts: PackParts, key: str, path: str, data: bytes) -> Any:
    try:
        return loads_strict(data, max_integer_digits=MAX_INTEGER_DIGITS, exact_numbers=True)
    except StrictJSONError as exc:
        parts.checks.append(
            PackCheck(
                check_id=f"parse.{key}",
                status="failed",
                message=f"{path} is not strict JSON: {exc.code}: {exc.message} at {exc.path}",
                file=path,
            )
        )
        return None


def parts_from_files(files: Mapping[str, bytes], *, source: str) -> PackParts:
    """Parse a pack given as ``{path inside the pack: bytes}`` (a directory or a zip, read by the caller)."""
    parts = PackParts(source=source, files=dict(files))
    parts.paths = dict(DEFAULT_PATHS)
    if MANIFEST_PATH not in files:
        parts.checks.append(
            PackCheck(
                check_id="manifest.present",
                status="failed",
                message="manifest.json is missing",
                file=MANIFEST_PATH,
            )
        )
    else:
        decoded = _decode(parts, "manifest", MANIFEST_PATH, files[MANIFEST_PATH])
        if decoded is not None:
            try:
                parts.manifest = PackManifest.model_validate(decoded)
            except ValidationError as exc:
                message, errors = _validation_message(exc)
                parts.checks.append(
                    PackCheck(
                        check_id="parse.manifest",
                        status="failed",
                        file=MANIFEST_PATH,
                        message=f"manifest.json is not a valid manifest: {message}",
                        details={"errors": errors},
                    )
                )
    if parts.manifest is not None:
        for key, entry in parts.manifest.files.items():
            if key in DEFAULT_PATHS:
                parts.paths[key] = entry.path
    for key in DEFAULT_PATHS:
        path = parts.paths[key]
        if path not in files:
            if key in REQUIRED_PARTS:
                parts.checks.append(
                    PackCheck(
                        check_id=f"parse.{key}",
                        status="failed",
                        file=path,
                        message=f"{path} is missing from the pack",
                    )
                )
            continue
        value = _decode(parts, key, path, files[path])
        if value is not None:
            _parse_part(parts, key, value)
    return parts


def parts_from_document(document: Any, *, source: str) -> PackParts:
    """Parse a pack given as one JSON object keyed by part (``prompt_spec``, ..., optional ``manifest``)."""
    parts = PackParts(source=source, paths={key: f"$.{key}" for key in DEFAULT_PATHS})
    if not isinstance(document, dict):
        parts.checks.append(
            PackCheck(
                check_id="parse.document",
                status="failed",
                file="$",
                message="a single-document pack must be a JSON object keyed by part",
            )
        )
        return parts
    unknown = sorted(set(document) - set(DEFAULT_PATHS) - {"manifest"})
    if unknown:
        parts.checks.append(
            PackCheck(
                check_id="parse.document",
                status="failed",
                file="$",
                message=f"unknown top-level keys: {unknown}",
                details={"unknown": unknown},
            )
        )
    for key in DEFAULT_PATHS:
        if key not in document or document[key] is None:
            if key in REQUIRED_PARTS:
                parts.checks.append(
                    PackCheck(
                        check_id=f"parse.{key}",
                        status="failed",
                        file=f"$.{key}",
                        message=f"the document has no {key}",
                    )
                )
            continue
        _parse_part(parts, key, document[key])
    return parts
