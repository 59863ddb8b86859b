"""``ledger audit INPUT.json [--format json|text]``: run the Auditor offline on one submission.

Input is a v1 envelope, or its body ``{"prompt_spec": {...}, "evidence_bundle": {...}}`` (``-``
reads standard input): exactly what ``ledger publish`` accepts. No database, no broker. The input
goes through the consumer's own decoder (:func:`engine.envelope.decode_submission`), so a file
gets the same verdict here as its record gets on the topic: strict JSON, the models, the size
limit (``LEDGER_MAX_MESSAGE_BYTES``) and the cross-field checks (market ids, evidence ids,
requirement ids). Then it audits and prints the report of :func:`engine.auditor.audit_report`
(trace, verification, step hashes, roots).

Exit codes: 0 when the audit ran (findings about the evidence, such as conflicts or insufficient
evidence, are results, not errors); 2 when the input cannot be read or the consumer would refuse
it, with the consumer's reason code and one line per problem naming its field path, e.g.
``$.evidence_bundle.items[2].provenance.tier``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cli.exit_status import EXIT_FAILED, EXIT_USAGE
from engine.auditor import audit_report
from engine.canonical import CanonicalizationError
from engine.envelope import DecodedEnvelope, EnvelopeError, Reason
from engine.envelope_inputs import decode_submission
from ledger.settings import get_settings

__all__ = ["load_submission", "register", "render_json", "render_text", "run"]


class InputError(Exception):
    """Invalid input: ``problems`` are ``(path, message)`` pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{path}: {message}" for path, message in problems))
        self.problems = problems


class UnreadableInput(InputError):
    """The file itself cannot be read (a usage or environment error, not a verdict on its content)."""


AUDIT_DESCRIPTION = (
    'Runs the Auditor offline on one {"prompt_spec", "evidence_bundle"} file (- reads standard input) and '
    "prints the trace, verification, step hashes and roots. No database or broker is needed. Exit 0 when "
    "the audit ran (conflicts and insufficient evidence are results, not errors); exit 1 when the input "
    "is not strict JSON or does not validate (the consumer would dead-letter it), with its reason code and "
    "one line per problem naming its field path, such as $.evidence_bundle.items[2].provenance.tier; exit 2 "
    "when the file cannot be read."
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``audit`` command."""
    parser = subparsers.add_parser(
        "audit",
        description=AUDIT_DESCRIPTION,
    )
    parser.add_argument(
        "input",
        metavar="INPUT.json",
        help='file holding an envelope (v1 or v2) or {"prompt_spec", "evidence_bundle"}, or -',
    )
    parser.add_argument(
        "--format", choices=("json", "text"), default="json", help="output format (default json)"
    )
    parser.set_defaults(handler=run)


def _read(source: str) -> bytes:
    """The input, read up to one byte past the record limit (a device or a pipe may never end)."""
    limit = get_settings().max_message_bytes
    try:
        if source == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with Path(source).open("rb") as handle:
                data = handle.read(limit + 1)
    except OSError as exc:
        raise UnreadableInput([("$", f"cannot read {source}: {exc.strerror or exc}")]) from exc
    if len(data) > limit:
        raise EnvelopeError(Reason.OVERSIZE, f"{source} holds more than {limit} bytes, the limit")
    return data


def load_submission(data: bytes, *, max_bytes: int | None = None) -> DecodedEnvelope:
    """Decode and validate as the consumer does; raises :class:`~engine.envelope.EnvelopeError`."""
    limit = get_settings().max_message_bytes if max_bytes is None else max_bytes
    return decode_submission(data, max_bytes=limit)


def render_json(report: Mapping[str, Any]) -> str:
    """Stable JSON: sorted keys, two-space indent, raw UTF-8."""
    return json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _step_summary(step: Mapping[str, Any]) -> list[str]:
    """One or two short lines saying what a step found."""
    output = step.get("output", {})
    if step["type"] == "extract":
        lines = []
        for item in output.get("items", []):
            claims = ", ".join(
                f"{c['key']}={_value(c['value'])} ({c['kind']})" for c in item.get("claims", [])
            )
            notes = f"  notes: {', '.join(item['notes'])}" if item.get("notes") else ""
            lines.append(f"{item['evidence_id']}: {claims or 'no claims'}{notes}")
        return lines
    if step["type"] == "check" and "requirements" in output:
        return [
            f"{req['requirement_id']}: eligible {', '.join(req.get('eligible', [])) or 'none'}"
            + "".join(f"; {i['evidence_id']} {i['reason']}" for i in req.get("items", []) if "reason" in i)
            for req in output["requirements"]
        ]
    if step["type"] == "aggregate":
        return [
            f"{sel['requirement_id']}: selected {', '.join(sel.get('selected', [])) or 'nothing'}"
            + (f" (failure: {sel['failure']})" if "failure" in sel else "")
            for sel in output.get("selections", [])
        ]
    if step["type"] == "check":
        found = [f"{c['check_id']} ({c['severity']})" for c in output.get("contradictions", [])]
        return [f"contradictions: {', '.join(found) or 'none'}"]
    if step["type"] == "deduce":
        keys = (
            "value",
            "comparator",
            "threshold",
            "event_observed",
            "observed_outcome",
            "insufficient_reasons",
        )
        return ["  ".join(f"{key}={_value(output[key])}" for key in keys if key in output)]
    return []


def render_text(report: Mapping[str, Any]) -> str:
    """A readable summary: steps, checks, evaluation variables and roots."""
    trace = report["trace"]
    verification = report["verification"]
    lines = [
        f"audit of market {report['market_id']}  bundle {report['bundle_id']}  trace {report['trace_id']}",
        f"engine {report['engine_version']}  policy {trace['policy']['decoding_policy']}, "
        f"max_steps {trace['policy']['max_steps']}",
        "",
        f"steps ({len(trace['steps'])}):",
    ]
    for step, digest in zip(trace["steps"], report["step_hashes"], strict=True):
        lines.append(f"  {step['step_id']}  {step['type']:<9} {step['action']:<31} {digest}")
        lines.append(f"      evidence: {', '.join(step['evidence_ids']) or '-'}")
        lines.extend(f"      {line}" for line in _step_summary(step))
    ok = "ok" if verification["ok"] else "NOT ok"
    lines += ["", f"checks ({len(verification['checks'])}, {ok}):"]
    for check in verification["checks"]:
        mark = "ok  " if check["ok"] else "FAIL"
        lines.append(f"  [{mark}] {check['severity']:<5} {check['check_id']}: {check['message']}")
    if "challenge" in verification:
        lines.append(f"  challenge: {_value(verification['challenge'])}")
    lines += ["", "evaluation variables:"]
    for key, value in sorted((report.get("evaluation_variables") or {}).items()):
        lines.append(f"  {key}: {_value(value)}")
    lines += [
        "",
        "roots:",
        f"  prompt_spec_hash  {report['prompt_spec_hash']}",
        f"  evidence_root     {report['evidence_root']}  ({report['evidence_leaf_count']} leaves)",
        f"  reasoning_root    {report['reasoning_root']}  ({report['reasoning_leaf_count']} leaves)",
    ]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """Handler of ``ledger audit``."""
    try:
        decoded = load_submission(_read(args.input))
        report = audit_report(decoded.envelope.prompt_spec, decoded.envelope.evidence_bundle)
    except UnreadableInput as exc:
        print(f"ledger audit: {exc.problems[0][1]}", file=sys.stderr)
        return EXIT_USAGE  # the file cannot be read
    except InputError as exc:
        print(f"ledger audit: invalid input {args.input}:", file=sys.stderr)
        for path, message in exc.problems:
            print(f"  {path}: {message}", file=sys.stderr)
        return EXIT_FAILED
    except EnvelopeError as exc:  # the consumer would dead-letter it with this reason code
        print(f"ledger audit: invalid input {args.input}: {exc.reason.value}", file=sys.stderr)
        for path, message in exc.problems:
            print(f"  {path}: {message}", file=sys.stderr)
        return EXIT_FAILED
    except CanonicalizationError as exc:
        print(f"ledger audit: input cannot be canonicalised: {exc.reason} at {exc.path}", file=sys.stderr)
        return EXIT_FAILED
    output = render_json(report) if args.format == "json" else render_text(report)
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(output)
    else:  # UTF-8 whatever the locale, so the bytes never depend on LANG
        sys.stdout.flush()
        buffer.write(output.encode("utf-8"))
        buffer.flush()
    return 0
