"""Transparency-log commands: keygen, checkpoint, prove, export-log, verify-log and audit-log.

``audit-log`` is the independent verifier: it imports nothing that touches a database (the
database modules are imported inside the other handlers only).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cli.exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE, for_ledger_error
from ledger.translog.audit_command import add_audit_command
from ledger.translog.keys import SigningKeyError, generate_key_files, load_public_key
from ledger.translog.note import MAX_NOTE_BYTES, NoteError, check_origin, verifier_key

DEFAULT_ORIGIN_HELP = (
    "log origin (default: the stored checkpoints', else LEDGER_LOG_ORIGIN, else cournot-ledger.local/log)"
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the transparency-log commands."""
    p = subparsers.add_parser(
        "keygen",
        description="Writes a new Ed25519 private key to PATH (mode 0600) and its public key to PATH.pub, "
        "then prints the verifier key. Keep the private key off the database host. Point LEDGER_SIGNING_KEY "
        "at it, or pass it to `ledger checkpoint --key`.",
    )
    p.add_argument(
        "--out", type=Path, required=True, help="private key path (written 0600); PATH.pub beside it"
    )
    p.add_argument(
        "--origin", default="cournot-ledger.local/log", help="log origin to print the verifier key for"
    )
    p.add_argument("--force", action="store_true", help="replace an existing key file")
    p.set_defaults(handler=run_keygen)

    p = subparsers.add_parser(
        "checkpoint",
        description="Adds every new entry to the RFC 6962 tree, signs the tree head with the Ed25519 key and "
        "stores the signed note in the ledger; the note is printed on stdout. --out also writes it to a file: "
        "an existing directory or a path ending in / receives checkpoint-<size>-<time>.note; an existing "
        "file is never replaced without --force (exit 2).",
    )
    p.add_argument("--key", type=Path, default=None, help="private key (default: LEDGER_SIGNING_KEY)")
    p.add_argument("--origin", default=None, help=DEFAULT_ORIGIN_HELP)
    p.add_argument(
        "--out",
        default=None,
        metavar="FILE|DIR/",
        help="also write the signed note to FILE, or into DIR (existing, or written with a trailing /)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--topic", default=None, help="also publish it to this Kafka topic")
    p.add_argument("--bootstrap", default=None, help="Kafka bootstrap (default: LEDGER_KAFKA_BOOTSTRAP)")
    p.set_defaults(handler=run_checkpoint)

    p = subparsers.add_parser(
        "prove",
        description="Prints, as JSON, the inclusion proof of an entry's leaf against a stored checkpoint, or "
        "the consistency proof between two tree sizes. `ledger audit-log` checks the result offline.",
    )
    p.add_argument(
        "target",
        nargs="?",
        help="the entry or submission: a global_seq, a submission id, an entry hash, or the idempotency key "
        "`ledger publish` printed (inputs:0x…)",
    )
    p.add_argument(
        "--consistency",
        nargs=2,
        type=int,
        metavar=("OLD_SIZE", "NEW_SIZE"),
        help="prove that the tree of NEW_SIZE entries extends the tree of OLD_SIZE entries; NEW_SIZE must be "
        "covered by a signed checkpoint (else exit 2: run `ledger checkpoint` first)",
    )
    p.add_argument(
        "--checkpoint", type=int, default=None, help="prove against this checkpoint id (default: latest)"
    )
    p.add_argument("--with-payload", action="store_true", help="include the entry's canonical payload text")
    p.add_argument("--out", type=Path, default=None, help="write the JSON here instead of stdout")
    p.set_defaults(handler=run_prove)

    p = subparsers.add_parser(
        "export-log",
        description="Writes every stored checkpoint note, the consistency proofs between them and the "
        "entries (entries.jsonl) into a directory that `ledger audit-log` can check without a database.",
    )
    p.add_argument("--out", type=Path, required=True, help="directory to write into")
    p.add_argument(
        "--with-payload", action="store_true", help="include canonical payload texts in entries.jsonl"
    )
    p.set_defaults(handler=run_export)

    p = subparsers.add_parser(
        "verify-log",
        description="Checks each stored checkpoint's signature, recomputes its root from the stored entries "
        "and checks consistency between checkpoints; exported notes given with --checkpoint are checked "
        "too. Exit 1 when a check fails.",
    )
    p.add_argument("--public-key", type=Path, default=None, help="default: LEDGER_SIGNING_KEY's .pub")
    p.add_argument("--checkpoint", type=Path, action="append", default=[], help="an exported checkpoint note")
    p.set_defaults(handler=run_verify_log)

    add_audit_command(subparsers)  # also `python -m ledger.translog audit-log`, without the rest


class NoteFileError(ValueError):
    """An exported checkpoint file is not a note (not UTF-8 text): the input checked is invalid (exit 1)."""


def read_checkpoint_notes(paths: Sequence[Path]) -> list[tuple[str, str]]:
    """``(path, text)`` of each exported checkpoint note; :class:`NoteFileError` names one that is not UTF-8."""
    notes = []
    for path in paths:
        with path.open("rb") as handle:  # bounded: a device or FIFO may never end
            data = handle.read(MAX_NOTE_BYTES + 1)
        if len(data) > MAX_NOTE_BYTES:
            raise NoteFileError(f"{path}: not a checkpoint note (more than {MAX_NOTE_BYTES} bytes)")
        try:
            notes.append((str(path), data.decode("utf-8")))
        except UnicodeDecodeError as exc:
            raise NoteFileError(f"{path}: not a checkpoint note (byte {exc.start} is not UTF-8)") from None
    return notes


def _error(command: str, message: object, status: int = EXIT_USAGE) -> int:
    """Print ``ledger COMMAND: message`` on stderr; a usage or environment error unless ``status`` says."""
    print(f"ledger {command}: {message}", file=sys.stderr)
    return status


def _status_of(exc: BaseException) -> int:
    """1 when stored entries, tree or checkpoints do not verify; 2 when the command could not run."""
    from ledger.errors import LedgerError
    from ledger.translog.checkpoints import CheckpointDamagedError
    from ledger.translog.proving import ProofDamagedError

    if isinstance(exc, ProofDamagedError | CheckpointDamagedError):
        return EXIT_FAILED
    return for_ledger_error(exc) if isinstance(exc, LedgerError) else EXIT_USAGE


def run_keygen(args: argparse.Namespace) -> int:
    """Create the key pair and print where it went."""
    try:
        check_origin(args.origin)  # before any file is written
        pub_path, public_key = generate_key_files(args.out, overwrite=args.force)
    except (SigningKeyError, NoteError, OSError) as exc:
        return _error("keygen", exc)
    print(f"private key: {args.out} (mode 0600; keep it off the database host's backups)")
    print(f"public key:  {pub_path}")
    print(f"verifier key for origin {args.origin}: {verifier_key(args.origin, public_key)}")
    return 0


@contextmanager
def _engine() -> Iterator[Any]:
    from devstack.database import open_database

    with open_database(create=False) as engine:
        yield engine


def run_checkpoint(args: argparse.Namespace) -> int:
    """Sign a checkpoint, store it, and export it."""
    from ledger.errors import LedgerError
    from ledger.settings import get_settings
    from ledger.translog.checkpoints import (
        CheckpointError,
        check_out_target,
        create_checkpoint,
        export_to_file,
        export_to_topic,
    )
    from ledger.translog.keys import load_private_key

    key_path = args.key or get_settings().signing_key
    if key_path is None:
        return _error(
            "checkpoint",
            "no signing key: set LEDGER_SIGNING_KEY or pass --key (create one with ledger keygen)",
        )
    refusal = check_out_target(args.out, overwrite=args.force) if args.out is not None else None
    if refusal is not None:
        # checked before signing, so a refused --out leaves no new checkpoint behind
        return _error("checkpoint", refusal)
    try:
        private_key = load_private_key(Path(key_path))
        with _engine() as engine:
            stored = create_checkpoint(engine, private_key, origin=args.origin)
    except (SigningKeyError, CheckpointError, LedgerError, OSError) as exc:
        return _error("checkpoint", exc, _status_of(exc))
    try:
        if args.out is not None:
            written = export_to_file(stored.note, args.out, overwrite=args.force)
            print(f"written to {written}", file=sys.stderr)
        if args.topic:
            export_to_topic([(stored.origin, stored.note)], args.topic, args.bootstrap)
            print(f"published to topic {args.topic}", file=sys.stderr)
    except (CheckpointError, LedgerError, OSError) as exc:
        # The checkpoint is already stored: say so, so nobody signs again believing nothing happened.
        return _error(
            "checkpoint",
            f"checkpoint {stored.checkpoint_id} (tree size {stored.tree_size}) is stored, but exporting it "
            f"failed: {exc}; `ledger export-log` writes the stored checkpoints again",
            _status_of(exc),
        )
    print(
        f"checkpoint {stored.checkpoint_id}: tree size {stored.tree_size}, root 0x{stored.root_hash.hex()}",
        file=sys.stderr,
    )
    sys.stdout.write(stored.note)
    return 0


def _emit(document: object, out: Path | None) -> None:
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
        print(f"written to {out}", file=sys.stderr)


def run_prove(args: argparse.Namespace) -> int:
    """Print an inclusion or a consistency proof bundle."""
    from ledger.errors import LedgerError
    from ledger.translog import proving

    if (args.target is None) == (args.consistency is None):
        return _error(
            "prove", "give either an entry (global_seq, submission id, entry hash) or --consistency OLD NEW"
        )
    try:
        with _engine() as engine, engine.connect() as connection:
            if args.consistency is not None:
                document: object = proving.prove_consistency(connection, *args.consistency)
            else:
                document = proving.prove_entries(connection, args.target, args.checkpoint, args.with_payload)
    except (proving.ProofError, LedgerError) as exc:
        return _error("prove", exc, _status_of(exc))
    try:
        _emit(document, args.out)
    except OSError as exc:  # --out names a directory, or a path that cannot be written
        return _error("prove", f"cannot write {args.out or 'the output'}: {exc.strerror or exc}")
    return 0


def run_export(args: argparse.Namespace) -> int:
    """Write what an auditor needs into a directory."""
    from ledger.errors import LedgerError
    from ledger.translog import proving

    try:
        with _engine() as engine, engine.connect() as connection:
            summary = proving.export_log(connection, args.out, with_payload=args.with_payload)
    except (proving.ProofError, LedgerError, OSError) as exc:
        return _error("export-log", exc, _status_of(exc))
    print(summary)
    return 0


def run_verify_log(args: argparse.Namespace) -> int:
    """Run :func:`verify_checkpoints` and print its problems."""
    from ledger.errors import LedgerError
    from ledger.translog.verify import verify_checkpoints

    try:
        public_key = load_public_key(args.public_key) if args.public_key else None
        notes = read_checkpoint_notes(args.checkpoint)
        with _engine() as engine:
            problems = verify_checkpoints(engine, public_key=public_key, external_notes=notes)
    except NoteFileError as exc:
        return _error("verify-log", exc, EXIT_FAILED)
    except (SigningKeyError, LedgerError, OSError) as exc:
        return _error("verify-log", exc, _status_of(exc))
    for problem in problems:
        print(problem.render())
    errors = [p for p in problems if p.severity == "error"]
    print(f"verify-log: {'FAILED, ' + str(len(errors)) + ' problem(s)' if errors else 'ok'}")
    return EXIT_FAILED if errors else EXIT_OK
