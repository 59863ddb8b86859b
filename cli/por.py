"""``ledger verify-por PATH... [--format text|json]``: verify Cournot PoR packs offline.

Each PATH is a pack directory, a ``.zip`` of one, or one JSON document holding the parts. No
database and no broker are used. Exit codes: 0 every pack is genuine; 1 some pack failed or could
not be verified; 2 usage error or an unreadable input (the other packs are still verified).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from cli.exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from cli.options import add_database_url, add_format
from engine.por_pack import PackReport
from ledger.por_files import PackReadError, verify_pack_path

__all__ = ["printable", "register", "render_json", "render_text", "run"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``verify-por``."""
    p = subparsers.add_parser(
        "verify-por",
        description="Recomputes each pack's manifest hashes, market ids and all five roots, and names every "
        "failure with its file, root, leaf and a Merkle proof. Exit 0 when every pack is genuine, 1 when one "
        "failed or is unverifiable, 2 when one cannot be read. Needs no database.",
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="pack directory, .zip or .json")
    p.add_argument("--format", choices=("text", "json"), default="text", help="report format (default text)")
    p.set_defaults(handler=run)
    register_replay(subparsers)


_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with control characters (terminal escapes) and lone surrogates shown as ``\\uXXXX``.

    Packs are untrusted: their strings must neither drive the terminal nor make ``print`` fail.
    JSON output stays valid and means the same: those characters only occur inside its strings.
    """
    return _UNPRINTABLE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def render_json(reports: list[PackReport], unreadable: list[dict[str, str]]) -> str:
    """The documented JSON report: every pack's checks and challenges, plus a summary."""
    summary = {"ok": 0, "failed": 0, "unverifiable": 0, "unreadable": len(unreadable)}
    for report in reports:
        summary[report.status] += 1
    document: dict[str, Any] = {
        "report_version": "por-verification.v1",
        "summary": summary,
        "packs": [report.model_dump(mode="json") for report in reports],
        "unreadable": unreadable,
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)


def _where(check: Any) -> str:
    parts = [check.file or "", check.root or ""]
    if check.leaf_index is not None:
        parts.append(f"leaf {check.leaf_index}")
    if check.step_id:
        parts.append(f"step {check.step_id}")
    if check.evidence_id:
        parts.append(f"evidence {check.evidence_id}")
    return " ".join(part for part in parts if part)


def render_text(reports: list[PackReport], unreadable: list[dict[str, str]]) -> str:
    """One line per pack, then one indented line per failed, unverifiable or warning check."""
    lines: list[str] = []
    for report in reports:
        lines.append(
            f"{report.status.upper():<13} {report.source}  market={report.market_id} por_root={report.por_root}"
        )
        for check in report.checks:
            if check.status != "ok":
                lines.append(f"  {check.status:<12} {check.check_id:<34} [{_where(check)}] {check.message}")
        for challenge in report.challenges:
            proof = challenge.merkle_proof
            tree = f" proof={proof.tree}[{proof.index}]/{proof.leaf_count}" if proof else ""
            against = challenge.details.get("proof_against", "")
            lines.append(
                f"  challenge    {challenge.kind:<34} {challenge.challenge_id} leaf={challenge.leaf_index}{tree} {against}"
            )
    for item in unreadable:
        lines.append(f"UNREADABLE    {item['path']}  {item['error']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Verify every PATH and print the reports."""
    reports: list[PackReport] = []
    unreadable: list[dict[str, str]] = []
    for path in args.paths:
        try:
            reports.append(verify_pack_path(path))
        except PackReadError as exc:
            unreadable.append({"path": str(path), "error": str(exc)})
        except (
            Exception
        ) as exc:  # a hostile pack must not hide the other packs' reports: fail closed (exit 2)
            unreadable.append(
                {"path": str(path), "error": f"cannot be verified: {type(exc).__name__}: {exc}"}
            )
    render = render_json if args.format == "json" else render_text
    print(printable(render(reports, unreadable)))
    if unreadable:
        return EXIT_USAGE
    return EXIT_OK if all(report.status == "ok" for report in reports) else EXIT_FAILED


def register_replay(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``replay-por``."""
    p = subparsers.add_parser(
        "replay-por",
        description="Verifies every PoR pack stored in the ledger again and compares the report with the "
        "stored one. Exit 0 when all are identical, 1 when one diverged, 2 when the ledger cannot be read.",
    )
    p.add_argument("--submission", default=None, help="only this submission id")
    p.add_argument("--market", default=None, help="only this market")
    add_format(p, json_help="one JSON line per pack, then a summary line")
    add_database_url(p)
    p.set_defaults(handler=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    """Exit 0 when every stored pack re-verifies to its stored report, 1 on divergence, 2 on errors."""
    import psycopg
    import sqlalchemy.exc

    from devstack.database import open_database
    from ledger.errors import LedgerError
    from ledger.replay.por import replay_por_packs
    from ledger.settings import get_settings
    from ledger.store.read import snapshot

    settings = get_settings()
    if args.database_url:
        settings = settings.model_copy(update={"database_url": args.database_url})
    counts = {"identical": 0, "diverged": 0}
    try:
        with open_database(settings, migrate=False, create=False) as engine, snapshot(engine) as conn:
            for result in replay_por_packs(conn, submission=args.submission, market=args.market):
                counts["identical" if result.identical else "diverged"] += 1
                if args.format == "json":
                    print(json.dumps(result.as_dict(), sort_keys=True))
                elif not result.identical:
                    print(
                        f"DIVERGED {result.submission_id} seq={result.global_seq} "
                        f"stored={result.stored_status} replayed={result.replayed_status} {result.error or ''}"
                    )
    except (LedgerError, psycopg.Error, sqlalchemy.exc.SQLAlchemyError, OSError) as exc:
        print(f"ledger replay-por: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if (args.submission or args.market) and not counts["identical"] + counts["diverged"]:
        chosen = f"submission {args.submission!r}" if args.submission else f"market {args.market!r}"
        print(f"ledger replay-por: no stored PoR pack for {chosen}", file=sys.stderr)
        return EXIT_USAGE  # nothing was checked: never a quiet success on an empty selection
    print(
        json.dumps(counts, sort_keys=True)
        if args.format == "json"
        else f"{counts['identical']} identical, {counts['diverged']} diverged"
    )
    return EXIT_OK if counts["diverged"] == 0 else EXIT_FAILED
