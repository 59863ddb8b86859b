"""``ledger publish FILE...``: validate envelopes (or bare inputs pairs) and send them to the topic."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from aiokafka.errors import KafkaError

from cli.exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from cli.options import add_format
from consumers.logs import configure_logging
from consumers.publisher import EnvelopePublisher, PreparedRecord, prepare_file
from devstack.services import resolve_broker, settings_with
from engine.envelope import EnvelopeError

__all__ = ["register"]


def _header(text: str) -> tuple[str, bytes]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value.encode("utf-8")


def register(subparsers: Any) -> None:
    """Add ``publish`` to the ``ledger`` command line."""
    parser = subparsers.add_parser(
        "publish",
        description=(
            "Each FILE holds a v1 envelope or an object with 'prompt_spec' and 'evidence_bundle' "
            "(wrapped into an envelope). Everything is validated exactly as the consumer will before "
            "anything is sent; the record key is the market id. Prints one line per record sent."
        ),
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="JSON file to send (an envelope or a bundle)"
    )
    parser.add_argument("--topic", help="target topic (default: LEDGER_TOPIC or evidence-bundles)")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: LEDGER_KAFKA_BOOTSTRAP)")
    parser.add_argument("--raw", action="store_true", help="send the files' bytes unvalidated (poison tests)")
    parser.add_argument("--event-id", help="producer event id (the idempotency key); one FILE only")
    parser.add_argument("--verify-reasoning", action="store_true", help="request LLM reasoning verification")
    parser.add_argument(
        "--header",
        type=_header,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="add a Kafka record header to every record (repeatable)",
    )
    add_format(parser, json_help="JSON lines")
    parser.set_defaults(handler=run)


def _prepare(args: argparse.Namespace, max_bytes: int) -> tuple[list[PreparedRecord], list[list[str]], int]:
    """The prepared records; for each invalid or unreadable file its lines: the file and reason, then
    every problem with its JSON path (a schema violation often has several; all are listed); and how
    many of those files could not be read at all."""
    records: list[PreparedRecord] = []
    errors: list[list[str]] = []
    unreadable = 0
    for path in args.files:
        try:
            records.append(
                prepare_file(
                    path,
                    raw=args.raw,
                    event_id=args.event_id,
                    verify_reasoning=True if args.verify_reasoning else None,
                    max_bytes=max_bytes,
                )
            )
        except EnvelopeError as exc:
            errors.append(
                [f"{path}: {exc.reason.value}"] + [f"  {where}: {message}" for where, message in exc.problems]
            )
        except OSError as exc:
            errors.append([f"{path}: {exc.strerror or exc}"])
            unreadable += 1
    return records, errors, unreadable


def run(args: argparse.Namespace) -> int:
    """Validate every file, then send them all; nothing is sent if any file is invalid."""
    if args.event_id and len(args.files) != 1:
        print("--event-id needs exactly one FILE", file=sys.stderr)
        return EXIT_USAGE
    configure_logging("warning")
    settings = settings_with(bootstrap=args.bootstrap)
    records, errors, unreadable = _prepare(args, settings.max_message_bytes)
    if errors:
        for lines in errors:
            print(f"invalid: {lines[0]}", file=sys.stderr)
            for line in lines[1:]:
                print(line, file=sys.stderr)
        print(f"nothing sent: {len(errors)} of {len(args.files)} file(s) invalid", file=sys.stderr)
        return EXIT_USAGE if unreadable else EXIT_FAILED  # a file that cannot be read is not checked
    broker = resolve_broker(settings)
    assert broker is not None
    topic = args.topic or settings.topic
    largest = max(len(record.value) for record in records)

    async def send() -> list[Any]:
        request_size = max(2 * settings.max_message_bytes, largest + 65_536)
        async with EnvelopePublisher(
            broker.bootstrap, topic=topic, max_request_size=request_size
        ) as publisher:
            return await publisher.publish_many(records, extra_headers=args.header)

    try:
        sent = asyncio.run(send())
    except KafkaError as exc:  # an unreachable or refusing broker: the command could not run
        print(f"ledger publish: broker {broker.bootstrap}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for item in sent:
        summary = item.summary()
        if args.format == "json":
            print(json.dumps(summary, ensure_ascii=False))
        else:
            what = summary["idempotency_key"] or "raw, unvalidated"
            print(
                f"sent {summary['source']} -> {summary['topic']}[{summary['partition']}]@{summary['offset']} "
                f"key={summary['key']} bundle={summary['bundle_id']} ({what}, {summary['bytes']} bytes)"
            )
    return EXIT_OK
