"""``ledger replay`` and ``ledger verify``: prove the engine deterministic and the ledger intact.

Exit codes (both): 0 all good; 1 something diverged, failed to replay, or is broken; 2 the command
could not run (bad arguments, no database, missing schema). Version drift alone exits 0 unless
``--fail-on-drift``. ``--format json`` prints one JSON document on stdout
(``docs/replay-and-verify.md``); the progress bar goes to stderr, only on a TTY or with --progress.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import sqlalchemy.exc
from sqlalchemy import Engine

from cli.options import add_database_url
from cli.progress import CountProgress
from devstack.extra import EmbeddedExtraMissing
from ledger.errors import LedgerError

__all__ = ["register"]


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )
    add_database_url(parser)
    bar = parser.add_mutually_exclusive_group()
    bar.add_argument("--progress", action="store_true", help="progress bar on stderr even when not a TTY")
    bar.add_argument("--no-progress", action="store_true", help="never draw the progress bar")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``replay`` and ``verify``."""
    p = subparsers.add_parser(
        "replay",
        description="Replays audited submissions from their stored canonical inputs and reports each as "
        "identical, diverged (with the first differing step and a diff) or version drift. LLM exchanges "
        "are replayed from their records unless --live.",
    )
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--submission", metavar="ID", help="one submission (id or idempotency key)")
    scope.add_argument("--market", metavar="ID", help="every submission of one market")
    scope.add_argument("--all", action="store_true", help="every audited submission (the default)")
    p.add_argument(
        "--since", metavar="WHEN", help="only submissions after a global_seq, a duration (24h) or a date"
    )
    p.add_argument(
        "--live", action="store_true", help="ask the LLM providers again instead of replaying records"
    )
    p.add_argument(
        "--record", action="store_true", help="append a replay.verified entry to each replayed chain"
    )
    p.add_argument(
        "--jobs", type=int, default=0, help="worker processes (default 0: one per CPU from 1,000 submissions)"
    )
    p.add_argument("--show-identical", action="store_true", help="list identical submissions too")
    p.add_argument("--fail-on-drift", action="store_true", help="exit 1 on version drift as well")
    _common(p)
    p.set_defaults(handler=run_replay_command)

    v = subparsers.add_parser(
        "verify",
        description="The Sentinel over the ledger: entry hashes, per-submission chains, the global sequence, "
        "step hashes, PoR roots and transparency-log checkpoints. Every broken item is reported with a "
        "challenge (kind, submission, step, leaf index, Merkle proof).",
    )
    v.add_argument(
        "--public-key", type=Path, default=None, help="checkpoint key (default: LEDGER_SIGNING_KEY.pub)"
    )
    v.add_argument("--checkpoint", type=Path, action="append", default=[], help="an exported checkpoint note")
    v.add_argument("--no-translog", action="store_true", help="skip the transparency-log checkpoints")
    v.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="worker processes (default 0: one per CPU from 2,000 submissions when workers can be forked, else from 10,000)",
    )
    _common(v)
    v.set_defaults(handler=run_verify_command)


@contextmanager
def _engine(args: argparse.Namespace) -> Iterator[Engine]:
    from devstack.database import open_database
    from ledger.settings import get_settings

    settings = get_settings()
    if args.database_url:
        settings = settings.model_copy(update={"database_url": args.database_url})
    with open_database(settings, migrate=False, create=False) as engine:
        yield engine


def _bar(args: argparse.Namespace, label: str) -> CountProgress:
    enabled = not args.no_progress and (args.progress or sys.stderr.isatty())
    return CountProgress(label, sys.stderr, enabled=enabled)


def _fail(command: str, exc: BaseException) -> int:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.errors.UndefinedTable) or "does not exist" in message:
        message += " (run `ledger migrate`)"
    print(f"ledger {command}: {message}", file=sys.stderr)
    return 2


_RUN_ERRORS = (LedgerError, psycopg.Error, sqlalchemy.exc.SQLAlchemyError, OSError, RuntimeError, ValueError)


def run_replay_command(args: argparse.Namespace) -> int:
    """Replay, print the summary (or JSON), and exit 1 on divergence."""
    from ledger.replay.runner import run_replay
    from ledger.replay.source import ReplaySelection, parse_since, resolve_submission
    from ledger.store.read import snapshot

    try:
        since_seq, since_time = parse_since(args.since) if args.since else (None, None)
    except ValueError as exc:
        return _fail("replay", exc)
    bar = _bar(args, "replay")
    try:
        with _engine(args) as engine:
            submission = args.submission
            if submission is not None:
                with snapshot(engine) as conn:
                    submission = resolve_submission(conn, submission)
                if submission is None:
                    print(f"ledger replay: no submission {args.submission!r}", file=sys.stderr)
                    return 2
            selection = ReplaySelection(submission, args.market, since_seq, since_time)
            recorder = None
            if args.record:
                from ledger.replay.record import ReplayRecorder

                recorder = ReplayRecorder(engine, live=args.live)
            report = run_replay(
                engine,
                selection,
                live=args.live,
                jobs=args.jobs,
                keep_identical=args.show_identical,
                progress=bar,
                recorder=recorder,
            )
            if recorder is not None:
                report.recorded = recorder.summary()
    except EmbeddedExtraMissing:
        raise  # cli.main.run prints the one line naming the extra
    except _RUN_ERRORS as exc:
        return _fail("replay", exc)
    finally:
        bar.close()
    if args.format == "json":
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
    else:
        from cli.render import render_replay

        print(render_replay(report))
    drift = args.fail_on_drift and report.counts["version_drift"] > 0
    return 0 if report.ok and not drift else 1


def run_verify_command(args: argparse.Namespace) -> int:
    """Verify, print every problem (or JSON), and exit 1 when anything is broken."""
    from cli.translog import NoteFileError, read_checkpoint_notes
    from ledger.translog.keys import SigningKeyError, load_public_key
    from ledger.verify.runner import run_verify

    bar = _bar(args, "verify")
    try:
        public_key = load_public_key(args.public_key) if args.public_key else None
        notes = read_checkpoint_notes(args.checkpoint)
        with _engine(args) as engine:
            report = run_verify(
                engine,
                translog=not args.no_translog,
                public_key=public_key,
                external_notes=notes,
                progress=bar,
                jobs=args.jobs,
            )
    except EmbeddedExtraMissing:
        raise  # cli.main.run prints the one line naming the extra
    except NoteFileError as exc:  # the exported checkpoint given to check is invalid: the check failed
        print(f"ledger verify: {exc}", file=sys.stderr)
        return 1
    except (*_RUN_ERRORS, SigningKeyError) as exc:
        return _fail("verify", exc)
    finally:
        bar.close()
    if args.format == "json":
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=2))
    else:
        from cli.render import render_verify

        print(render_verify(report))
    return 0 if report.ok else 1
